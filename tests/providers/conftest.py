"""The provider adapter tests send model requests: to wire replays, never to the network."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from steadyrun.models import model_requests


@pytest.fixture(autouse=True)
def _allow_model_requests() -> Iterator[None]:
    # The suite blocks model requests (tests/conftest.py); these tests are about requests, and
    # the network guard still keeps them on this machine.
    with model_requests(True):
        yield
