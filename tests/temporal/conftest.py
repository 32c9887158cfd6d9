"""Temporal engine tests, on the session's dev server (``temporal_server``, tests/conftest.py).

Every test here is marked ``temporal`` and skipped, with the reason, when temporalio or the
temporal CLI is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from devserverkit import either_engine, temporal_missing


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/temporal/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.temporal)
            missing = temporal_missing()
            if missing:
                item.add_marker(pytest.mark.skip(reason=missing))


@pytest.fixture(params=["builtin", "temporal"])
def engine(request: pytest.FixtureRequest) -> Any:
    """Either engine, as ``extmw_kit`` opens it: ``engine(agent, folder, **kw)``."""
    import extmw_kit

    return either_engine(request, extmw_kit)
