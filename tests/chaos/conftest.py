"""The chaos suites' options (their summary is the root conftest's, ``chaostotals``).

``--long`` (or ``STEADYRUN_CHAOS_LONG=1``) makes the random fault-injection suite run thousands
of kills instead of CI's short seeded version; see docs/faults.md. The option is known when
pytest starts in or below ``tests/chaos`` (``pytest tests/chaos --long``); the environment
variable works from anywhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="chaos: run the long random fault-injection suite (thousands of kills)",
    )


def long_mode(config: pytest.Config) -> bool:
    """Whether the long random suite was asked for."""
    flag = bool(config.getoption("--long", default=False))
    return flag or os.environ.get("STEADYRUN_CHAOS_LONG", "") not in ("", "0")


@pytest.fixture
def chaos_long(request: pytest.FixtureRequest) -> bool:
    """Whether this is a ``--long`` run."""
    return long_mode(request.config)
