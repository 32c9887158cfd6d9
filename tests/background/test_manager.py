"""Background tools on one worker: adoption, explicit background, progress, cancel, input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import steadyrun as sr
from bgkit import Build, Deploy, RecoverableBuild, Registry
from steadyrun.background import MemoryTaskStore, TaskManager, Update, render_progress
from steadyrun.chat import TextPart
from steadyrun.testing import ScriptedModel, text, tool_calls


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait until ``check`` holds (bounded, so a bug fails instead of hanging)."""
    for _ in range(2000):
        if await check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


def receipt(result: sr.RunResult, call_id: str) -> dict[str, str]:
    return json.loads(result.call(call_id).result or "{}")  # type: ignore[no-any-return]


def system_texts(request: sr.ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "system"]


async def test_a_call_past_its_foreground_timeout_is_adopted_and_runs_once() -> None:
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg)], lease=2.0, poll=0.02)
    model = ScriptedModel(
        [tool_calls(("build", {"repo": "shop"})), text("started it"), text("it is built")]
    )
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    runtime = sr.Runtime(runs)
    async with manager:
        result = await runtime.run(agent, run_id="r", input="build the shop")
        assert result.status == "completed" and result.text == "started it"
        got = receipt(result, "m1.c1")
        assert got["task_id"] == "r/m1.c1" and got["status"] == "running"
        assert got["description"] == "build shop"
        task = await tasks.get("r/m1.c1")
        assert task is not None and task.attempt == 0 and task.owner == manager.owner
        reg.gate("r/m1.c1").set()

        async def announced() -> bool:
            return bool(await runs.pending("r", 0))

        await eventually(announced, "the run hears the task ended")
    assert reg.starts == {"r/m1.c1": 1}  # adopted, never started again
    done = await runtime.resume("r")
    assert done.text == "it is built"
    note = system_texts(model.requests[2])
    assert note and "completed" in note[0] and "r/m1.c1" in note[0]
    task = await tasks.get("r/m1.c1")
    assert task is not None and task.status == "completed" and task.output == {"built": "r/m1.c1"}


async def test_a_call_that_finishes_in_time_is_an_ordinary_result() -> None:
    reg = Registry()
    reg.gate("r/m1.c1").set()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg)])
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), text("done")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    result = await sr.Runtime(runs).run(agent, run_id="r", input="go")
    assert json.loads(result.call("m1.c1").result or "") == {"built": "r/m1.c1"}
    assert await tasks.get("r/m1.c1") is None


async def test_a_call_the_policy_does_not_adopt_is_stopped_and_settled_by_its_traits() -> None:
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg, adopt=False)])
    model = ScriptedModel([tool_calls(("build", {"repo": "shop"})), text("gave up")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    result = await sr.Runtime(runs).run(agent, run_id="r", input="go")
    record = result.call("m1.c1")
    assert record.status == "needs_review"  # side effects, not replayable
    assert "stopped" in (record.result or "")
    assert reg.stops == ["r/m1.c1"]


async def test_the_model_can_ask_for_the_background_at_once() -> None:
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg)], poll=0.02)
    model = ScriptedModel(
        [tool_calls(("build", {"repo": "a", "run_in_background": True})), text("queued")]
    )
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    result = await sr.Runtime(runs).run(agent, run_id="r", input="go")
    assert receipt(result, "m1.c1")["status"] == "running"
    assert reg.starts == {}  # nothing started in the foreground
    async with manager:

        async def started() -> bool:
            return reg.starts.get("r/m1.c1") == 1

        await eventually(started, "a worker starts the task")
        task = await tasks.get("r/m1.c1")
        assert task is not None and task.attempt == 1 and task.started
        reg.gate("r/m1.c1").set()

        async def ended() -> bool:
            t = await tasks.get("r/m1.c1")
            return t is not None and t.notified

        await eventually(ended, "the task ends and the run is told")
    assert reg.starts == {"r/m1.c1": 1}
    schema = next(t for t in manager.tools() if t.name == "build").parameters
    assert schema["properties"]["run_in_background"]["type"] == "boolean"


async def test_progress_updates_are_kept_once_in_order_and_written_to_a_file(
    tmp_path: Path,
) -> None:
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg)], poll=0.02, output_dir=tmp_path)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            tool_calls(("task_status", {"task_id": "r/m1.c1"})),
            text("building"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    async with manager:
        result = await sr.Runtime(runs).run(agent, run_id="r", input="go")

        async def flushed() -> bool:
            return len(await tasks.updates("r/m1.c1")) == 2

        await eventually(flushed, "updates reach the store")
        reg.gate("r/m1.c1").set()
    status = result.call("m2.c1").result or ""
    assert "r/m1.c1 (build shop): running" in status
    assert [u.event_id for u in await tasks.updates("r/m1.c1")] == ["e1", "e2"]
    lines = (tmp_path / "r_m1.c1.jsonl").read_text().splitlines()
    assert [json.loads(x)["event_id"] for x in lines] == ["e1", "e2"]
    # Replayed after recovery: nothing is added twice, in the store or the file.
    assert manager.materializer is not None
    assert not await manager.materializer.append("r/m1.c1", Update(event_id="e1", data="cloning"))
    assert not await tasks.add_update("r/m1.c1", Update(event_id="e2"))


async def test_cancel_reaches_the_running_operation() -> None:
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg)], lease=0.3, poll=0.02)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            tool_calls(("cancel_task", {"task_id": "r/m1.c1"})),
            text("cancelled it"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    async with manager:
        result = await sr.Runtime(runs).run(agent, run_id="r", input="go")
        assert "cancellation requested" in (result.call("m2.c1").result or "")

        async def stopped() -> bool:
            t = await tasks.get("r/m1.c1")
            return t is not None and t.status == "cancelled" and t.notified

        await eventually(stopped, "the operation is stopped")
    assert reg.stops == ["r/m1.c1"]


async def test_a_run_cannot_see_or_cancel_another_runs_task() -> None:
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Build(reg)])
    reg.gate("other/m1.c1").set()
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "x", "run_in_background": True})),
            text("ok"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    await sr.Runtime(runs).run(agent, run_id="other", input="go")
    spy = ScriptedModel([tool_calls(("cancel_task", {"task_id": "other/m1.c1"})), text("no")])
    agent2 = sr.Agent(name="b", model=spy, tools=manager.tools())
    result = await sr.Runtime(runs).run(agent2, run_id="r", input="go")
    assert result.call("m1.c1").status == "failed"
    task = await tasks.get("other/m1.c1")
    assert task is not None and not task.cancel_requested


async def test_a_resumable_task_waits_for_input_and_resumes_exactly_once() -> None:
    reg = Registry()
    deploy = Deploy(reg)
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [deploy], poll=0.02, lease=1.0)
    model = ScriptedModel([tool_calls(("deploy", {"repo": "api"})), text("deploying")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    async with manager:
        await sr.Runtime(runs).run(agent, run_id="r", input="deploy")

        async def asks() -> bool:
            return bool(await manager.pending_inputs("r"))

        await eventually(asks, "the task asks its question")
        (waiting,) = await manager.pending_inputs("r")
        assert waiting.input is not None and waiting.input.prompt == "Deploy which version?"
        wait_id = waiting.input.wait_id
        with pytest.raises(sr.InvalidResponseError):
            await manager.answer(waiting.id, wait_id, {"version": 7})
        with pytest.raises(sr.UsageError):
            await manager.answer(waiting.id, "forged.wait", {"version": "1.2"})
        assert await manager.answer(waiting.id, wait_id, {"version": "1.2"})
        assert not await manager.answer(waiting.id, wait_id, {"version": "9.9"})

        async def deployed() -> bool:
            t = await tasks.get(waiting.id)
            return t is not None and t.status == "completed"

        await eventually(deployed, "the answer resumes the task")
        assert not await manager.answer(waiting.id, wait_id, {"version": "9.9"})
    assert deploy.resumes == [(wait_id, {"version": "1.2"})]
    task = await tasks.get(waiting.id)
    assert task is not None and task.output == {"deployed": "1.2"}


async def test_a_worker_that_died_is_replaced_recoverable_tasks_reattach_plain_ones_settle() -> (
    None
):
    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    first = TaskManager(tasks, runs, [Build(reg), RecoverableBuild(reg)], lease=0.2, poll=0.02)
    model = ScriptedModel(
        [tool_calls(("build", {"repo": "a"}), ("rbuild", {"repo": "b"})), text("both started")]
    )
    agent = sr.Agent(name="a", model=model, tools=first.tools())
    await first.start()
    await sr.Runtime(runs).run(agent, run_id="r", input="go")
    await first.stop(release=False)  # as if killed: its leases run out on their own

    second = TaskManager(tasks, runs, [Build(reg), RecoverableBuild(reg)], lease=0.2, poll=0.02)
    reg.gate("r/m1.c2").set()
    async with second:

        async def settled() -> bool:
            a, b = await tasks.get("r/m1.c1"), await tasks.get("r/m1.c2")
            return bool(a and b and a.notified and b.notified)

        await eventually(settled, "the second worker settles both")
    plain, recovered = await tasks.get("r/m1.c1"), await tasks.get("r/m1.c2")
    assert plain is not None and plain.status == "failed" and plain.needs_review
    assert recovered is not None and recovered.status == "completed" and recovered.attempt == 1
    assert reg.starts == {"r/m1.c1": 1, "r/m1.c2": 1} and reg.recovers == {"r/m1.c2": 1}


async def test_a_worker_that_lost_its_lease_cannot_write() -> None:
    tasks = MemoryTaskStore()
    from datetime import UTC, datetime, timedelta

    from steadyrun.background import Outcome, Task

    now = datetime(2026, 1, 1, tzinfo=UTC)
    await tasks.insert(Task(id="t", run_id="r", call_id="c", tool="build", arguments="{}"))
    (a,) = await tasks.claim("A", now, timedelta(seconds=1))
    later = now + timedelta(seconds=2)
    (b,) = await tasks.claim("B", later, timedelta(seconds=1))
    assert (a.attempt, b.attempt) == (1, 2)
    assert not await tasks.record("t", "A", later, Outcome(status="completed", output=1))
    assert not await tasks.renew("t", "A", later + timedelta(seconds=5))
    assert await tasks.record("t", "B", later, Outcome(status="completed", output=2))
    task = await tasks.get("t")
    assert task is not None and task.output == 2


def test_updates_are_bounded() -> None:
    from steadyrun.background import Update
    from steadyrun.background._model import check_update

    for bad in (
        Update(event_id=""),
        Update(event_id="x", kind="k" * 200),
        Update(event_id="x", data="d" * (256 * 1024 + 1)),
        Update(event_id="x", metadata={str(i): "v" for i in range(33)}),
        Update(event_id="x", metadata={"k": "v" * 2000}),
    ):
        with pytest.raises(sr.UsageError):
            check_update(bad)


def test_progress_reader_formats_recent_updates() -> None:
    from steadyrun.background import Task

    task = Task(id="t", run_id="r", call_id="c", tool="build", arguments="{}", description="d")
    out = render_progress(task, [Update(event_id="1", kind="log", data="x" * 3000)])
    assert out.startswith("task t (d): running") and out.endswith("[...]")
    assert isinstance(TextPart(text=out), TextPart)


async def test_task_questions_show_in_runtime_pending_and_answers_route_to_the_task() -> None:
    reg = Registry()
    deploy = Deploy(reg)
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [deploy], poll=0.02, lease=1.0)
    runtime = sr.Runtime(runs)
    runtime.use_tasks(manager)
    model = ScriptedModel([tool_calls(("deploy", {"repo": "api"})), text("deploying")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    async with manager:
        await runtime.run(agent, run_id="r", input="deploy")

        async def asks() -> bool:
            return any(i.kind == "task_input" for i in await runtime.pending("r"))

        await eventually(asks, "the question shows in Runtime.pending")
        (item,) = [i for i in await runtime.pending("r") if i.kind == "task_input"]
        assert item.call_id == "m1.c1" and item.prompt == "Deploy which version?"
        assert item.wait_id is not None and not item.blocking
        with pytest.raises(sr.InvalidResponseError):
            await runtime.answer("r", item.wait_id, {"version": 3})
        record = await runtime.answer("r", item.wait_id, {"version": "2.0"})
        assert record.id == "m1.c1"
        await runtime.answer("r", item.wait_id, {"version": "2.0"})  # sent twice

        async def done() -> bool:
            t = await tasks.get("r/m1.c1")
            return t is not None and t.status == "completed"

        await eventually(done, "the task resumes")
    assert deploy.resumes == [(item.wait_id, {"version": "2.0"})]
    assert [i for i in await runtime.pending("r") if i.kind == "task_input"] == []


async def test_an_invocation_past_its_overall_timeout_is_stopped() -> None:
    reg = Registry()

    class Slow(Build):
        name = "slow_build"
        invocation_timeout = 0.3

    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Slow(reg)], lease=0.15, poll=0.02)
    model = ScriptedModel([tool_calls(("slow_build", {"repo": "x"})), text("started")])
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    async with manager:
        await sr.Runtime(runs).run(agent, run_id="r", input="go")

        async def timed_out() -> bool:
            t = await tasks.get("r/m1.c1")
            return t is not None and t.status == "cancelled"

        await eventually(timed_out, "the overall timeout stops it")
    task = await tasks.get("r/m1.c1")
    assert task is not None and "did not finish within 0.3 s" in (task.error or "")
    assert reg.stops == ["r/m1.c1"]


async def test_arguments_are_validated_and_prepared_before_anything_starts() -> None:
    reg = Registry()
    reg.gate("r/m2.c1").set()

    class Prepared(Build):
        name = "prepared_build"

        async def prepare_input(self, args: Any) -> Any:
            if args.repo == "default":
                return args.model_copy(update={"repo": "main-repo"})
            return args

        def describe(self, args: Any) -> str:
            return f"build {args.repo}"

    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    manager = TaskManager(tasks, runs, [Prepared(reg)])
    model = ScriptedModel(
        [
            tool_calls(("prepared_build", {"repo": 5})),
            tool_calls(("prepared_build", {"repo": "default", "run_in_background": True})),
            text("ok"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=manager.tools())
    result = await sr.Runtime(runs).run(agent, run_id="r", input="go")
    assert result.call("m1.c1").status == "failed" and reg.starts == {}
    assert "repo" in (result.call("m1.c1").error or "")
    task = await tasks.get("r/m2.c1")
    assert task is not None and json.loads(task.arguments)["repo"] == "main-repo"
    assert task.description == "build main-repo"


class _StallAfterInsert(MemoryTaskStore):
    """A task store whose first insert is followed by the process dying."""

    def __init__(self, crash: asyncio.Event) -> None:
        super().__init__()
        self.crash = crash

    async def insert(self, task: Any) -> Any:
        stored = await super().insert(task)
        if not self.crash.is_set():
            self.crash.set()
            await asyncio.Event().wait()  # dies here: adopted, the receipt never saved
        return stored


async def test_a_call_adopted_just_before_a_crash_gets_its_receipt_on_resume() -> None:
    from crashkit import crash_when

    reg = Registry()
    runs = sr.MemoryStore()
    crash = asyncio.Event()
    tasks = _StallAfterInsert(crash)
    first = TaskManager(tasks, runs, [RecoverableBuild(reg)], lease=0.2, poll=0.02)
    model = ScriptedModel([tool_calls(("rbuild", {"repo": "shop"}))])
    agent = sr.Agent(name="a", model=model, tools=first.tools(), extensions=[first.recovery()])
    await crash_when(sr.Runtime(runs).run(agent, run_id="r", input="go"), crash)

    second = TaskManager(tasks, runs, [RecoverableBuild(reg)], lease=0.2, poll=0.02)
    again = ScriptedModel([text("it is building"), text("built")])
    resumed = sr.Agent(name="a", model=again, tools=second.tools(), extensions=[second.recovery()])
    runtime = sr.Runtime(runs, agents=[resumed])
    result = await runtime.resume("r")
    record = result.call("m1.c1")
    assert record.status == "succeeded" and receipt(result, "m1.c1")["task_id"] == "r/m1.c1"
    reg.gate("r/m1.c1").set()
    async with second:

        async def told() -> bool:
            return bool(await runs.pending("r", 0))

        await eventually(told, "the recovered task ends and the run is told")
    assert reg.starts == {"r/m1.c1": 1} and reg.recovers == {"r/m1.c1": 1}
    assert (await runtime.resume("r")).text == "built"


async def test_a_recoverable_call_that_died_in_its_foreground_wait_runs_again() -> None:
    from crashkit import crash_when

    reg = Registry()
    runs, tasks = sr.MemoryStore(), MemoryTaskStore()
    crash = asyncio.Event()

    class Slow(RecoverableBuild):
        foreground_timeout = 30.0

        async def start(self, task: Any, args: Any) -> Any:
            op = await super().start(task, args)
            crash.set()  # dies while the call waits in the foreground
            return op

    manager = TaskManager(tasks, runs, [Slow(reg)])
    model = ScriptedModel([tool_calls(("rbuild", {"repo": "shop"}))])
    agent = sr.Agent(name="a", model=model, tools=manager.tools(), extensions=[manager.recovery()])
    await crash_when(sr.Runtime(runs).run(agent, run_id="r", input="go"), crash)
    assert await tasks.get("r/m1.c1") is None  # never adopted

    reg.gate("r/m1.c1").set()  # the operation (idempotent by task id) has finished meanwhile
    again = ScriptedModel([text("built")])
    resumed = sr.Agent(
        name="a", model=again, tools=manager.tools(), extensions=[manager.recovery()]
    )
    result = await sr.Runtime(runs, agents=[resumed]).resume("r")
    assert result.call("m1.c1").status == "succeeded"
    assert json.loads(result.call("m1.c1").result or "") == {"built": "r/m1.c1"}
