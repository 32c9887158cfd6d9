"""Test-suite wide guards: no real model requests, no network beyond this machine."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

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
