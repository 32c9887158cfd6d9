"""Planning: the model keeps a task list; it survives crashes and is published as the plan."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.extensions import PlanItem, Planning, SubAgents
from steadyrun.testing import ScriptedModel, text, tool_calls


def agent(model: ScriptedModel, *tools: sr.Tool, **kw: object) -> sr.Agent:
    return sr.Agent(name="planner", model=model, tools=list(tools), extensions=[Planning(**kw)])  # type: ignore[arg-type]


async def test_the_model_builds_and_updates_a_plan() -> None:
    model = ScriptedModel(
        [
            tool_calls(("create_task", {"title": "Find the order"})),
            tool_calls(("create_task", {"title": "Refund it"})),
            tool_calls(("update_task", {"task_id": "t1", "status": "completed", "notes": "A-1"})),
            tool_calls(("get_task", {"task_id": "t1"}), ("list_tasks", {})),
            text("done"),
        ]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent(model), run_id="p", input="go")
    assert result.status == "completed"
    assert result.plan == [
        PlanItem(id="t1", title="Find the order", status="completed", notes="A-1"),
        PlanItem(id="t2", title="Refund it"),
    ]
    assert result.call("m4.c1").result == "t1 [completed] Find the order\nnotes: A-1"
    assert "- t2 [pending] Refund it" in (result.call("m4.c2").result or "")
    # The model sees the plan in its instructions from the call after it changed.
    assert "Current plan" not in model.requests[0].instructions
    assert "- t1 [completed] Find the order" in model.requests[4].instructions


async def test_bad_plan_operations_fail_with_reasons_the_model_sees() -> None:
    model = ScriptedModel(
        [
            tool_calls(("update_task", {"task_id": "t9", "status": "completed"})),
            tool_calls(("create_task", {"title": "  "})),
            tool_calls(("create_task", {"title": "one"})),
            tool_calls(("create_task", {"title": "two"})),
            tool_calls(("update_task", {"task_id": "t1", "status": "exploded"})),
            text("done"),
        ]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, max_tasks=1), run_id="p", input="go"
    )
    errors = [c.error or "" for c in result.calls]
    assert "no task 't9'" in errors[0]
    assert "needs a title" in errors[1]
    assert result.calls[2].status == "succeeded"
    assert "already holds 1 tasks" in errors[3]
    assert result.calls[4].status == "failed"  # schema: status is one of four values
    assert result.plan == [PlanItem(id="t1", title="one")]


async def test_a_plan_update_survives_a_crash_before_the_next_checkpoint() -> None:
    store = sr.MemoryStore()
    crash = asyncio.Event()

    @sr.tool(side_effects=False)
    async def slow_lookup() -> str:
        """Hangs until the process dies."""
        crash.set()
        await hang()
        return ""

    first = ScriptedModel(
        [
            tool_calls(("create_task", {"title": "Look up"})),
            tool_calls(
                ("update_task", {"task_id": "t1", "status": "in_progress"}), ("slow_lookup", {})
            ),
        ]
    )
    a = agent(first, slow_lookup)
    await crash_when(sr.Runtime(store).run(a, run_id="p", input="go"), crash)

    second = ScriptedModel([text("resumed")])
    result = await sr.Runtime(store, agents=[replace(a, model=second)]).resume("p")
    assert result.status == "completed"
    assert result.plan == [PlanItem(id="t1", title="Look up", status="in_progress")]
    assert "- t1 [in_progress] Look up" in second.requests[0].instructions
    assert result.call("m2.c2").status == "interrupted"


async def test_a_crash_inside_a_plan_update_leaves_the_plan_as_it_was() -> None:
    store = sr.MemoryStore()
    crash = asyncio.Event()

    class Stalling(Planning):
        async def update(self, task_id: str, **kw: object) -> PlanItem:  # type: ignore[override]
            item = await super().update(task_id, **kw)  # type: ignore[arg-type]
            crash.set()
            await hang()  # changed in memory, never recorded: the crash loses it
            return item

        def for_run(self) -> Stalling:
            return Stalling()

    first = ScriptedModel(
        [
            tool_calls(("create_task", {"title": "Look up"})),
            tool_calls(("update_task", {"task_id": "t1", "status": "completed"})),
        ]
    )
    a = sr.Agent(name="planner", model=first, extensions=[Stalling()])
    await crash_when(sr.Runtime(store).run(a, run_id="p", input="go"), crash)
    result = await sr.Runtime(store, agents=[replace(a, model=ScriptedModel([text("ok")]))]).resume(
        "p"
    )
    assert result.plan == [PlanItem(id="t1", title="Look up", status="pending")]
    assert result.call("m2.c1").status == "interrupted"  # the model may update it again


async def test_plan_is_kept_across_turns_and_stores(tmp_path: object) -> None:
    from pathlib import Path

    store = sr.SqliteStore(Path(str(tmp_path)) / "runs.db")
    model = ScriptedModel([tool_calls(("create_task", {"title": "first"})), text("ok")])
    runtime = sr.Runtime(store)
    await runtime.run(agent(model), run_id="p", input="one")
    model2 = ScriptedModel([tool_calls(("create_task", {"title": "second"})), text("ok")])
    result = await sr.Runtime(store).run(agent(model2), run_id="p", input="two")
    assert [i.id for i in result.plan] == ["t1", "t2"]
    await store.close()


async def test_sub_agents_do_not_get_the_planning_tools() -> None:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        names = {t.name for t in request.tools}
        if "create_task" in names:  # the main agent
            if not any(m.role == "tool" for m in request.messages):
                return tool_calls(("delegate", {"task": "look"}))
            return text("main done")
        assert "delegate" not in names
        return text("sub done")

    from steadyrun.testing import FunctionModel

    a = sr.Agent(name="planner", model=FunctionModel(respond), extensions=[Planning(), SubAgents()])
    result = await sr.Runtime(sr.MemoryStore()).run(a, run_id="p", input="go")
    assert result.text == "main done"
    assert result.call("m1.c1").result == "sub done"


async def test_observers_see_each_new_plan() -> None:
    seen: list[list[str]] = []

    class Watch(sr.Observer):
        def on_publish(self, run_id: str, name: str, value: object) -> None:
            assert name == "planning"
            seen.append([f"{i.id}:{i.status}" for i in value])  # type: ignore[attr-defined]

    model = ScriptedModel(
        [
            tool_calls(("create_task", {"title": "a"})),
            tool_calls(("list_tasks", {})),
            tool_calls(("update_task", {"task_id": "t1", "status": "completed"})),
            text("done"),
        ]
    )
    runtime = sr.Runtime(sr.MemoryStore(), observers=[Watch()])
    await runtime.run(agent(model), run_id="p", input="go")
    assert seen == [["t1:pending"], ["t1:completed"]]
