"""A lead agent whose sub-agent builds on the file-based "build farm" of ``temporal_bg_kit``.

The lead delegates ``build app``; its sub-agent (``lead.subagent``, the lead's tools) calls
``build`` (recoverable, adopted after a tenth of a second). The model is a function of the
request, so any worker answers a request the same way: the sub-agent answers the receipt with
``child: <receipt>`` and a task's notification with ``child told: <note>``; the lead answers
the delegation's result with ``lead: <result>`` (after asking for ``ship`` when the task says
``ship``) and the sub-agent's follow-up with ``lead told: <follow-up>``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from temporal_bg_kit import QuickBuild
from temporal_kit import Deps, effect, last_results, rounds

import steadyrun as sr
from steadyrun.background import MemoryTaskStore, Operation, TaskManager, TaskRef
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.control import Confirm
from steadyrun.extensions import SubAgents
from steadyrun.temporal import TemporalApp, TemporalOptions
from steadyrun.testing import FunctionModel, text, tool_calls

SUB = "You are a sub-agent"


class StoppableBuild(QuickBuild):
    """The quick build whose operation leaves ``stop <job>`` in the effects when stopped."""

    async def start(self, task: TaskRef, args: Any) -> Operation:
        return self._stoppable(await super().start(task, args))

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        return self._stoppable(await super().recover(task, args, checkpoint))

    def _stoppable(self, op: Operation) -> Operation:
        effects = self.effects

        async def stop() -> None:
            effect(Deps(effects=effects), f"stop {op.checkpoint['job']}")

        op.stop = stop  # type: ignore[method-assign]
        return op


@sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Ship it?"), concurrency_key="")
def ship(what: str) -> str:
    """Ship something (after a person approves).

    Args:
        what: What to ship.
    """
    return f"shipped {what}"


def model(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if request.instructions.startswith(SUB):
        if last.role == "system" and last.text.startswith("Background task"):
            return text("child told: " + last.text)
        if rounds(request) == 0:
            return tool_calls(("build", {"target": "app"}))
        return text("child: " + last_results(request))
    if last.role == "system" and last.text.startswith("The sub-agent"):
        return text("lead told: " + last.text)
    if rounds(request) == 0:
        return tool_calls(("delegate", {"task": request.messages[0].text}))
    if rounds(request) == 1 and "ship" in request.messages[0].text:
        return tool_calls(("ship", {"what": "app"}))
    if last.role == "user":
        return text("lead heard: " + last.text)
    return text("lead: " + last_results(request))


def build_app(
    store: Path, folder: Path, effects: Path, *, task_queue: str, **options: Any
) -> TemporalApp:
    """The lead's app (``options`` go to ``TemporalOptions``)."""
    build = StoppableBuild(folder, effects)
    manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), [build])
    lead = sr.Agent(
        name="lead",
        model=FunctionModel(model),
        tools=[*manager.tools(), ship],
        extensions=[SubAgents()],
    )
    settings: dict[str, Any] = {
        "heartbeat_timeout": timedelta(seconds=2),
        "retry_interval": timedelta(milliseconds=200),
        **options,
    }
    return TemporalApp(
        agents=[lead],
        store=sr.SqliteStore(store),
        options=TemporalOptions(task_queue=task_queue, **settings),
        background=[build],
    )
