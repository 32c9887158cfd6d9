"""The sub-agent scenarios of the background parity set (``bg_engines``' kit, split for size).

A sub-agent's slow call on both engines: adopted in the child, the delegation returning at
once, the task's ending a new turn of the child and a follow-up for the parent; and what that
later turn spent and changed in the parent's extensions, counted in the parent.
"""

from __future__ import annotations

from typing import Any

from bg_engines import Opener, _load, _receipt, _system_texts, run_id_for

import steadyrun as sr
from bgkit import Build, Registry
from steadyrun.chat import ModelResponse
from steadyrun.extensions import Extension, ModelCall, ModelNext
from steadyrun.runtime._extset import EXT_STATE
from steadyrun.testing import ScriptedModel, text, tool_calls


async def subagent_adoption(opener: Opener) -> None:
    """A sub-agent's slow call: adopted, the delegation returns, the ending a new child turn.

    The child's model gets the receipt and ends its turn, whose answer is the delegation's
    result at once; when the task ends, the child takes the notification in a new turn and
    the parent is told what it answered, in a new turn of its own.
    """
    reg, r = Registry(), run_id_for(opener)
    child, task_id = f"{r}/m1.c1", f"{r}/m1.c1/m1.c1"
    model = ScriptedModel(
        [
            tool_calls(("delegate", {"task": "build the shop"})),  # the parent
            tool_calls(("build", {"repo": "shop"})),  # the child
            text("started the build"),  # the child: the delegation's result
            text("delegated"),  # the parent's first turn ends, the task going
            text("the shop is built"),  # the child's new turn: the notification
            text("told"),  # the parent's new turn: what the child answered
        ]
    )
    async with opener(model, [Build(reg)], subagents=True) as session:
        await session.start(r, "build the shop")
        first = await session.first_turn(r)
        assert [m.text for m in first.context if m.role == "assistant"][-1] == "delegated"
        delegation = next(c for c in first.calls if c.id == "m1.c1")
        assert delegation.status == "succeeded" and delegation.result == "started the build"
        kid = await _load(session.store, child)
        assert _receipt(kid, "m1.c1")["task_id"] == task_id
        (task,) = await session.tasks(child)
        assert (task.id, task.status) == (task_id, "running")
        assert await session.tasks(r) == []  # the child's, not the parent's
        reg.gate(task_id).set()
        snap = await session.settled(r)
        (task,) = await session.tasks(child)
        kid = await _load(session.store, child)
    assert task.status == "completed" and task.notified
    assert reg.starts == {task_id: 1}
    ending = f'Background task {task_id} (build shop) completed:\n{{"built": "{task_id}"}}'
    assert _system_texts(model.requests[4]) == [ending]
    said = sr.Texts().subagent_follow_up.format(call_id="m1.c1", text="the shop is built")
    assert _system_texts(model.requests[5]) == [said]
    assert kid.run.status == "completed"
    assert [m.text for m in kid.context if m.role == "assistant"][-1] == "the shop is built"
    assert snap.run.status == "completed"
    assert [m.text for m in snap.context if m.role == "assistant"][-1] == "told"
    copied = {c.id for c in snap.calls if c.parent_id == "m1.c1"}
    assert "m1.c1/m1.c1" in copied  # the child's calls, under the delegation


class Counter(Extension):
    """Counts the sub-agent's model calls its middleware saw, in its run state.

    Deterministic (it runs in the workflow on Temporal). Only the sub-agent changes it: on
    Temporal the parent takes a child turn's states whole, so a change of its own in between
    would be lost (docs/temporal.md, "Not there yet").
    """

    name = "counter"
    temporal_io = False

    def __init__(self) -> None:
        self.sub = 0

    def save_state(self) -> Any:
        return {"sub": self.sub}

    def restore_state(self, state: Any) -> None:
        self.sub = int((state or {}).get("sub", 0))

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        self.sub += 1 if call.subagent else 0
        return await next(call)


async def subagent_later_turn_counts(opener: Opener) -> None:
    """A sub-agent's later turn: its usage and its extension states reach the parent.

    The child shares the parent's ``Counter``; its later turn (the task's ending) is one
    model call, counted in the parent's usage and in the parent's ``Counter`` state (the
    first turn's two already were, when the delegation returned).
    """
    reg, r = Registry(), run_id_for(opener)
    task_id = f"{r}/m1.c1/m1.c1"
    model = ScriptedModel(
        [
            tool_calls(("delegate", {"task": "build the shop"})),  # the parent
            tool_calls(("build", {"repo": "shop"})),  # the child
            text("started the build"),  # the child: the delegation's result
            text("delegated"),  # the parent's first turn ends, the task going
            text("the shop is built"),  # the child's later turn
            text("told"),  # the parent's new turn
        ]
    )
    async with opener(model, [Build(reg)], subagents=True, extensions=[Counter()]) as session:
        await session.start(r, "build the shop")
        first = await session.first_turn(r)
        assert first.run.usage.requests == 4
        assert first.checkpoint.extra[EXT_STATE]["counter"] == {"sub": 2}
        reg.gate(task_id).set()
        snap = await session.settled(r)
    assert [m.text for m in snap.context if m.role == "assistant"][-1] == "told"
    assert snap.run.usage.requests == 6  # the child's later turn's model call included
    assert snap.checkpoint.extra[EXT_STATE]["counter"] == {"sub": 3}
