"""Background-tool scenarios that run on either engine, and the two engines they run on.

A scenario is a function of an ``Opener``: it builds its agent from a model and background
tools, starts a run, moves the operations along (the ``bgkit`` registry's gates, in this
process) and checks what the store shows. ``Builtin`` runs it on ``Runtime`` with a
``TaskManager`` (a resume after each notification stands in for the service's worker);
``OnTemporal`` on a ``TemporalApp`` with an in-process worker.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

import steadyrun as sr
from bgkit import Build, Deploy, Registry
from steadyrun.background import BackgroundTool, MemoryTaskStore, Task, TaskManager, Update
from steadyrun.chat import ModelRequest
from steadyrun.extensions import Extension, SubAgents
from steadyrun.records import RunSnapshot
from steadyrun.testing import ScriptedModel, text, tool_calls


async def eventually(check: Callable[[], Awaitable[bool]], what: str, seconds: float = 60) -> None:
    """Wait until ``check`` holds; the cap only keeps a broken run from hanging."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not await check():
        if loop.time() > end:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


class Session(Protocol):
    """One agent on one engine, while it is open."""

    store: sr.Store

    async def start(self, run_id: str, input: str) -> None:
        """Start a run (returns before it ends)."""
        ...

    async def first_turn(self, run_id: str) -> RunSnapshot:
        """Wait until the run's first turn completed; the store's snapshot."""
        ...

    async def settled(self, run_id: str) -> RunSnapshot:
        """Wait until the run's tasks ended and the run took their notifications."""
        ...

    async def pending(self, run_id: str) -> list[sr.PendingItem]:
        """What the run waits for, its tasks' questions included."""
        ...

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> sr.CallRecord:
        """Answer a question by its wait id (``by``: who answered)."""
        ...

    async def tasks(self, run_id: str) -> list[Task]:
        """The run's background tasks."""
        ...

    async def updates(self, task_id: str) -> list[Update]:
        """A task's progress updates in its task tables (the store's, on Temporal)."""

    def service(self) -> Any:
        """A service ``App`` over the session's runs (executing none of them itself)."""
        ...


Opener = Callable[[ScriptedModel, Sequence[BackgroundTool]], Any]
"""``opener(model, tools)``: an async context manager giving a ``Session``."""


def run_id_for(opener: Opener) -> str:
    """The id a scenario gives its run: ``r``, unless the engine needs ids of their own."""
    fresh = getattr(opener, "fresh_run_id", None)
    return fresh() if fresh is not None else "r"


# -- the engines --------------------------------------------------------------------------


class _BuiltinSession:
    def __init__(
        self,
        model: ScriptedModel,
        tools: Sequence[BackgroundTool],
        subagents: bool = False,
        extensions: Sequence[Extension] = (),
    ) -> None:
        self.store: sr.Store = sr.MemoryStore()
        self.tasks_store = MemoryTaskStore()
        self.manager = TaskManager(self.tasks_store, self.store, list(tools), lease=1.0, poll=0.02)
        exts = [*([SubAgents()] if subagents else []), *extensions]
        self.agent = sr.Agent(name="a", model=model, tools=self.manager.tools(), extensions=exts)
        self.runtime = sr.Runtime(self.store, agents=[self.agent])
        self.runtime.use_tasks(self.manager)
        self.first: dict[str, asyncio.Task[sr.RunResult]] = {}

    async def start(self, run_id: str, input: str) -> None:
        self.first[run_id] = asyncio.create_task(
            self.runtime.run(self.agent, run_id=run_id, input=input)
        )

    async def first_turn(self, run_id: str) -> RunSnapshot:
        await self.first[run_id]
        return await _load(self.store, run_id)

    async def settled(self, run_id: str) -> RunSnapshot:
        await self.first[run_id]

        async def told() -> bool:
            snap = await _load(self.store, run_id)
            children = [f"{run_id}/{c.id}" for c in snap.calls if c.parent_id is None]
            tasks = []
            for run in [run_id, *children]:  # a sub-agent's tasks are its child run's
                tasks += await self.tasks_store.list_tasks(run)
            return all(t.final and t.notified for t in tasks)

        await eventually(told, "every task ended and the run was told")
        await self.runtime.resume(run_id)  # what the service's worker does for the feed
        return await _load(self.store, run_id)

    async def pending(self, run_id: str) -> list[sr.PendingItem]:
        return await self.runtime.pending(run_id)

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> sr.CallRecord:
        return await self.runtime.answer(run_id, wait_id, response, by=by)

    async def tasks(self, run_id: str) -> list[Task]:
        return await self.tasks_store.list_tasks(run_id)

    async def updates(self, task_id: str) -> list[Update]:
        return await self.tasks_store.updates(task_id)

    def service(self) -> Any:
        from steadyrun.service import App

        return App(self.runtime, worker=False)


@asynccontextmanager
async def builtin(
    model: ScriptedModel,
    tools: Sequence[BackgroundTool],
    *,
    subagents: bool = False,
    extensions: Sequence[Extension] = (),
) -> AsyncIterator[_BuiltinSession]:
    """The built-in engine: ``Runtime`` and a ``TaskManager`` worker in this process.

    With ``subagents`` the agent has ``SubAgents()`` (its ``delegate`` child has its tools),
    then ``extensions``.
    """
    session = _BuiltinSession(model, tools, subagents, extensions)
    async with session.manager:
        yield session


class _TemporalSession:
    def __init__(self, app: Any, runs: Any, store: sr.Store, queue: str = "") -> None:
        self.app = app
        self.runs = runs
        self.store = store
        self.queue = queue
        self.outputs: dict[str, Any] = {}

    async def start(self, run_id: str, input: str) -> None:
        await self.runs.start("a", run_id=run_id, input=input)

    async def first_turn(self, run_id: str) -> RunSnapshot:
        async def completed() -> bool:
            snap = await self.store.load(run_id)
            return snap is not None and snap.run.status == "completed"

        await eventually(completed, "the first turn completed in the store")
        return await _load(self.store, run_id)

    async def settled(self, run_id: str) -> RunSnapshot:
        out = await asyncio.wait_for(self.runs.result(run_id), 120)  # a cap, not a limit
        assert out.status == "completed", out
        self.outputs[run_id] = out
        # The workflow is deterministic: its history replays against the same app, and
        # so do its sub-agents' child workflows.
        snap = await _load(self.store, run_id)
        children = [f"{run_id}/{c.id}" for c in snap.calls if c.name.startswith("delegate")]
        for workflow_id in [run_id, *children]:
            history = await self.runs.client.get_workflow_handle(workflow_id).fetch_history()
            await self.app.replayer().replay_workflow(history)
        return snap

    async def pending(self, run_id: str) -> list[sr.PendingItem]:
        return await self.runs.pending(run_id)  # type: ignore[no-any-return]

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> sr.CallRecord:
        return await self.runs.answer(run_id, wait_id, response, by=by)  # type: ignore[no-any-return]

    async def tasks(self, run_id: str) -> list[Task]:
        return await self.runs.tasks(run_id)  # type: ignore[no-any-return]

    async def updates(self, task_id: str) -> list[Update]:
        from steadyrun.temporal._taskrecords import task_records

        return await task_records(self.store).updates(task_id)  # type: ignore[union-attr]

    def service(self) -> Any:
        from steadyrun.service import App
        from steadyrun.temporal import TemporalEngine

        engine = TemporalEngine(self.runs.client, task_queue=self.queue)
        return App(self.store, engine=engine)


def on_temporal(
    server: Any, folder: Path, *, extra_tools: Sequence[sr.Tool] = (), **options: Any
) -> Opener:
    """An opener of sessions on the Temporal dev server ``server`` (records in ``folder``).

    The agent also has ``extra_tools``; ``options`` go to ``TemporalOptions``.
    """

    @asynccontextmanager
    async def open_(
        model: ScriptedModel,
        tools: Sequence[BackgroundTool],
        *,
        subagents: bool = False,
        extensions: Sequence[Extension] = (),
    ) -> AsyncIterator[_TemporalSession]:
        from temporalio.client import Client

        from steadyrun.temporal import TemporalApp, TemporalOptions

        client = await Client.connect(server.target)
        queue = f"q-{uuid.uuid4().hex}"
        manager = TaskManager(MemoryTaskStore(), sr.MemoryStore(), list(tools))
        exts = [*([SubAgents()] if subagents else []), *extensions]
        agent = sr.Agent(
            name="a", model=model, tools=[*manager.tools(), *extra_tools], extensions=exts
        )
        store = sr.SqliteStore(folder / f"{queue}.db")
        settings: dict[str, Any] = {
            "heartbeat_timeout": timedelta(seconds=2),
            "retry_interval": timedelta(milliseconds=200),
            **options,
        }
        app = TemporalApp(
            agents=[agent],
            store=store,
            options=TemporalOptions(task_queue=queue, **settings),
            background=tools,
        )
        async with app.worker(client):
            yield _TemporalSession(app, app.runs(client), store, queue)
        await store.close()

    # Workflow ids outlive a test on the shared server: each run gets one of its own.
    open_.fresh_run_id = lambda: f"r{uuid.uuid4().hex[:8]}"  # type: ignore[attr-defined]
    return open_


async def _load(store: sr.Store, run_id: str) -> RunSnapshot:
    snap = await store.load(run_id)
    assert snap is not None
    return snap


def _system_texts(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "system"]


def _receipt(snap: RunSnapshot, call_id: str) -> dict[str, Any]:
    (call,) = [c for c in snap.calls if c.id == call_id]
    assert call.status == "succeeded", call
    return json.loads(call.result or "{}")  # type: ignore[no-any-return]


# -- the scenarios ------------------------------------------------------------------------


async def adoption(opener: Opener) -> None:
    """A call past its foreground timeout: a receipt, the run goes on, then is told."""
    reg, r = Registry(), run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            text("started it"),
            tool_calls(("task_output", {"task_id": f"{r}/m1.c1"})),
            text("it is built"),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "build the shop")
        first = await session.first_turn(r)
        assert first.run.status == "completed"
        got = _receipt(first, "m1.c1")
        assert got["task_id"] == f"{r}/m1.c1" and got["status"] == "running"
        assert got["description"] == "build shop"
        (task,) = await session.tasks(r)
        assert (task.id, task.call_id, task.status) == (f"{r}/m1.c1", "m1.c1", "running")
        reg.gate(f"{r}/m1.c1").set()
        snap = await session.settled(r)
        (task,) = await session.tasks(r)
    assert task.status == "completed" and task.output == {"built": f"{r}/m1.c1"} and task.notified
    assert reg.starts == {f"{r}/m1.c1": 1}  # adopted, never started again
    assert snap.run.status == "completed"
    assert [m.text for m in snap.context if m.role == "assistant"][-1] == "it is built"
    (note,) = _system_texts(model.requests[2])
    built = json.dumps({"built": f"{r}/m1.c1"})
    assert note == f"Background task {r}/m1.c1 (build shop) completed:\n{built}"
    output = next(c for c in snap.calls if c.name == "task_output")
    assert output.result == built


async def task_tools_in_a_later_turn(opener: Opener) -> None:
    """A task that ended before the run completed: the task tools find it in a new turn.

    New input to the completed run starts a new turn (on Temporal, a new workflow run): the
    task is still there, with its output and its progress, and listed after the run ended.
    """
    reg, r = Registry(), run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            text("started"),
            text("noted"),
            tool_calls(("task_status", {"task_id": f"{r}/m1.c1"})),
            tool_calls(("task_output", {"task_id": f"{r}/m1.c1"})),
            text("it built the shop"),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "build the shop")
        await session.first_turn(r)
        reg.gate(f"{r}/m1.c1").set()
        await session.settled(r)
        await _send(session, r, "what did it build?")
        await eventually(text_is(session, r, "it built the shop"), "the later turn")
        snap = await session.settled(r)
        (task,) = await session.tasks(r)
        (shown,) = await listed(session, r)
    built = {"built": f"{r}/m1.c1"}
    calls = {c.name: c for c in snap.calls}
    status, output = calls["task_status"], calls["task_output"]
    assert status.status == "succeeded" and output.status == "succeeded", (status, output)
    assert status.result == "\n".join(
        [f"task {r}/m1.c1 (build shop): completed", "[log] cloning", "[log] compiling"]
    )
    assert output.result == json.dumps(built)
    assert (task.status, task.output, task.notified) == ("completed", built, True)
    assert (shown["id"], shown["status"], shown["output"]) == (f"{r}/m1.c1", "completed", built)
    assert reg.starts == {f"{r}/m1.c1": 1}
    assert snap.run.status == "completed"


async def in_background_at_once(opener: Opener) -> None:
    """The model asks for the background: a receipt at once, the operation started once."""
    reg, r = Registry(), run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "a", "run_in_background": True})),
            text("queued"),
            text("done"),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")
        first = await session.first_turn(r)
        assert _receipt(first, "m1.c1")["status"] == "running"
        await eventually(_started(reg, f"{r}/m1.c1"), "the operation starts")
        reg.gate(f"{r}/m1.c1").set()
        snap = await session.settled(r)
    assert reg.starts == {f"{r}/m1.c1": 1}
    assert "completed" in _system_texts(model.requests[2])[0]
    assert snap.run.status == "completed"


async def task_tools_and_cancel(opener: Opener) -> None:
    """``task_status`` shows progress, ``task_output`` says not ready, ``cancel_task`` stops it."""
    reg, r = Registry(), run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            tool_calls(("task_status", {"task_id": f"{r}/m1.c1"})),
            tool_calls(("task_output", {"task_id": f"{r}/m1.c1"})),
            tool_calls(("task_status", {"task_id": "other/m1.c1"})),
            tool_calls(("cancel_task", {"task_id": f"{r}/m1.c1"})),
            text("cancelled it"),
            text("noted"),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")
        snap = await session.settled(r)
    calls = {c.id: c for c in snap.calls}
    status = calls["m2.c1"].result or ""
    assert status.startswith(f"task {r}/m1.c1 (build shop): running"), status
    assert calls["m3.c1"].result == "the task is still running; its output is not ready"
    assert calls["m4.c1"].status == "failed"  # a run sees only its own tasks
    assert "cancellation requested" in (calls["m5.c1"].result or "")
    assert reg.stops == [f"{r}/m1.c1"]
    note = _system_texts(model.requests[6])[0]
    assert note.startswith(f"Background task {r}/m1.c1 (build shop) was cancelled"), note
    assert snap.run.status == "completed"


async def progress(opener: Opener) -> None:
    """Progress updates reach ``task_status`` once each, in order (the operation repeats one)."""
    reg, r = Registry(), run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("build", {"repo": "shop"})),
            text("started"),
            tool_calls(("task_status", {"task_id": f"{r}/m1.c1"})),
            text("it is building"),
            text("built"),
        ]
    )
    async with opener(model, [Build(reg)]) as session:
        await session.start(r, "go")
        await session.first_turn(r)

        async def both() -> bool:
            return len(await session.updates(f"{r}/m1.c1")) == 2

        await eventually(both, "the updates stored (signalled first: task_status has them)")
        await _send(session, r, "how is it going?")
        await eventually(text_is(session, r, "it is building"), "the second turn")
        reg.gate(f"{r}/m1.c1").set()
        snap = await session.settled(r)
    status = next(c for c in snap.calls if c.name == "task_status").result or ""
    assert status.splitlines()[1:] == ["[log] cloning", "[log] compiling"], status


async def waiting_input(opener: Opener) -> None:
    """A resumable operation asks a question; the answer resumes it exactly once."""
    reg, r = Registry(), run_id_for(opener)
    deploy = Deploy(reg)
    model = ScriptedModel([tool_calls(("deploy", {"repo": "api"})), text("deploying"), text("ok")])
    async with opener(model, [deploy]) as session:
        await session.start(r, "deploy")
        await session.first_turn(r)

        async def asks() -> bool:
            return any(i.kind == "task_input" for i in await session.pending(r))

        await eventually(asks, "the task's question shows as pending")
        (item,) = [i for i in await session.pending(r) if i.kind == "task_input"]
        assert item.call_id == "m1.c1" and item.prompt == "Deploy which version?"
        assert item.wait_id == f"{r}/m1.c1.approve" and not item.blocking
        with pytest.raises(sr.InvalidResponseError):
            await session.answer(r, item.wait_id, {"version": 7})
        record = await session.answer(r, item.wait_id, {"version": "1.2"}, by="ann")
        assert record.id == "m1.c1"
        (task,) = await session.tasks(r)
        assert task.input is not None and task.input.answered_by == "ann"  # who answered
        snap = await session.settled(r)
    assert deploy.resumes == [(f"{r}/m1.c1.approve", {"version": "1.2"})]
    note = _system_texts(model.requests[2])[0]
    assert note == f'Background task {r}/m1.c1 (deploy) completed:\n{{"deployed": "1.2"}}', note
    assert snap.run.status == "completed"


def _started(reg: Registry, task_id: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return reg.starts.get(task_id) == 1

    return check


def text_is(session: Any, run_id: str, want: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        snap = await session.store.load(run_id)
        if snap is None or snap.run.status != "completed":
            return False
        said = [m.text for m in snap.context if m.role == "assistant"]
        return bool(said) and said[-1] == want

    return check


async def _send(session: Any, run_id: str, content: str) -> None:
    if isinstance(session, _BuiltinSession):
        await session.runtime.send(run_id, content)
        await session.runtime.resume(run_id)
    else:
        await session.runs.send(run_id, content)


class _Broken(Build):
    """A build whose operation fails after it was adopted."""

    name = "broken_build"

    async def start(self, task: Any, args: Any) -> Any:
        op = await super().start(task, args)

        async def wait() -> Any:
            await self.reg.gate(task.task_id).wait()
            raise RuntimeError("disk full")

        op.wait = wait  # type: ignore[method-assign]
        return op


class _Slow(Build):
    """A build past its overall time limit."""

    name = "slow_build"
    invocation_timeout = 0.5


async def failure_and_time_limit(opener: Opener) -> None:
    """An operation that fails, and one past its ``invocation_timeout``: both are told."""
    reg, r = Registry(), run_id_for(opener)
    model = ScriptedModel(
        [
            tool_calls(("broken_build", {"repo": "a"}), ("slow_build", {"repo": "b"})),
            text("both started"),
            text("one failed"),
            text("both ended"),
        ]
    )
    async with opener(model, [_Broken(reg), _Slow(reg)]) as session:
        await session.start(r, "go")
        await session.first_turn(r)
        reg.gate(f"{r}/m1.c1").set()
        snap = await session.settled(r)
    notes = sorted(_system_texts(model.requests[-1]))  # the context holds both
    assert notes == [
        f"Background task {r}/m1.c1 (build a) failed: RuntimeError: disk full",
        f"Background task {r}/m1.c2 (build b) was cancelled: did not finish within 0.5 s",
    ], notes
    assert reg.stops == [f"{r}/m1.c2"]
    assert snap.run.status == "completed"


async def listed(session: Session, run_id: str) -> list[dict[str, Any]]:
    """The run's tasks as the service's ``GET /runs/{id}/tasks`` shows them."""
    import httpx

    from steadyrun.service import create_app

    app = session.service()
    api = create_app(app, tokens=["t0k"])
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        got = await http.get(f"/runs/{run_id}/tasks", headers={"Authorization": "Bearer t0k"})
    assert got.status_code == 200, got.text
    return list(got.json()["tasks"])


async def listed_by_the_service(opener: Opener) -> None:
    """The service lists a run's tasks, their questions included, the same on either engine."""
    reg, r = Registry(), run_id_for(opener)
    deploy = Deploy(reg)
    model = ScriptedModel([tool_calls(("deploy", {"repo": "api"})), text("deploying"), text("ok")])
    async with opener(model, [deploy]) as session:
        await session.start(r, "deploy")
        await session.first_turn(r)

        async def asks() -> bool:
            return any(t["question"] for t in await listed(session, r))

        await eventually(asks, "the task's question shows in the service's listing")
        (task,) = await listed(session, r)
        assert (task["id"], task["call_id"], task["tool"]) == (f"{r}/m1.c1", "m1.c1", "deploy")
        assert task["status"] == "waiting_input" and task["description"] == "deploy"
        assert task["question"] == {
            "wait_id": f"{r}/m1.c1.approve",
            "prompt": "Deploy which version?",
            "answered": False,
            "answered_by": None,
        }
        await session.answer(r, f"{r}/m1.c1.approve", {"version": "1.2"}, by="ann")

        async def done() -> bool:
            (task,) = await listed(session, r)
            return bool(task["status"] == "completed")

        await eventually(done, "the task completed in the service's listing")
        (task,) = await listed(session, r)
        assert task["output"] == {"deployed": "1.2"} and task["question"]["answered"]
        assert task["question"]["answered_by"] == "ann"
        await session.settled(r)
