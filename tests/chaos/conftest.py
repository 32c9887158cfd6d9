"""The chaos suites' options and their summary at the end of every pytest run.

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

import randomrun  # noqa: E402


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Counts of the random fault-injection suite, shown in ``pytest -q`` output too."""
    totals = randomrun.TOTALS
    if not totals.runs:
        return
    terminalreporter.write_sep("=", "chaos: random fault injection")
    for store in sorted(totals.runs):
        terminalreporter.write_line(randomrun.summary_line(store))
    if len(totals.runs) > 1:
        terminalreporter.write_line(randomrun.summary_line("all"))
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(totals.kill_kinds.items()))
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(totals.statuses.items()))
    terminalreporter.write_line(f"kills by point: {kinds}; final call statuses: {statuses}")
    seen = ", ".join(f"{n} {s}" for s, n in sorted(totals.seen.items()))
    terminalreporter.write_line(f"situations met: {seen or 'none'}")
