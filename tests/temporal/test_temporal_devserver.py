"""``DevServer(dynamic_config=...)``: the values reach ``temporal server start-dev``.

The session's server (tests/devserverkit.py) is started with ``QUICK``, which makes a deleted
closed workflow go in a fraction of a second instead of up to half a minute; the tests that
delete workflows (retention, forgotten runs, delete from the host) depend on it for their time,
not for their result.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from devserverkit import QUICK  # noqa: E402


def test_each_dynamic_config_value_is_passed_as_json(temporal_server: Any) -> None:
    args = [str(a) for a in temporal_server._process.args]
    given = [args[i + 1] for i, a in enumerate(args) if a == "--dynamic-config-value"]
    assert given == [f"{key}={json.dumps(value)}" for key, value in QUICK.items()]
    assert temporal_server.dynamic_config == QUICK
