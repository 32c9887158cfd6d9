"""Background tools with the same observable result on the built-in engine and on Temporal.

Each scenario of ``bg_engines`` runs on both: adoption with a receipt and a notification
later, the background asked for at once, the task tools and cancel, progress, and a resumable
operation waiting for input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import bg_engines
import pytest

Scenario = Callable[[bg_engines.Opener], Awaitable[None]]

SCENARIOS: list[Scenario] = [
    bg_engines.adoption,
    bg_engines.in_background_at_once,
    bg_engines.task_tools_and_cancel,
    bg_engines.progress,
    bg_engines.waiting_input,
]


@pytest.fixture(params=["builtin", "temporal"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "builtin":
        return bg_engines.builtin
    pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")
    server = request.getfixturevalue("temporal_server")
    return bg_engines.on_temporal(server, tmp_path)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_background_scenario(opener: Any, scenario: Scenario) -> None:
    await scenario(opener)
