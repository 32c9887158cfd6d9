"""An extension whose instructions and middleware do real I/O, and the engines it runs on.

``Audited`` reads its instruction text from a file, caches model answers in a SQLite file
(``wrap_model``), asks a policy file which calls to refuse (``review_batch``) and writes an
audit row around each tool body (``wrap_tool``). Every hook writes a row to the SQLite file's
``log`` table with whether it ran inside a Temporal workflow. ``Brief`` is a deterministic
extension (``temporal_io = False``) placed before it, so the chains' order shows in the
results. ``builtin`` and ``on_temporal`` open the same agent on either engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.extensions import (
    BatchNext,
    Extension,
    ModelCall,
    ModelNext,
    ToolBatch,
    ToolCall,
    ToolNext,
    TurnView,
)
from steadyrun.records import CallRecord
from steadyrun.testing import FunctionModel, text, tool_calls
from steadyrun.tools import ToolContext


def _inside() -> bool:
    from temporalio import workflow

    return workflow.in_workflow()


class Audited(Extension):
    """Instructions, model middleware, batch review and tool middleware that do I/O."""

    name = "audited"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.calls = 0  # model calls it passed on: its run state

    def save_state(self) -> Any:
        return {"calls": self.calls}

    def restore_state(self, state: Any) -> None:
        self.calls = int((state or {}).get("calls", 0))

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.folder / "audit.db")
        db.execute(
            "create table if not exists log (n integer primary key, hook text, detail text, "
            "inside integer)"
        )
        db.execute("create table if not exists cache (question text primary key, answer text)")
        return db

    def _log(self, hook: str, detail: str) -> None:
        with closing(self._db()) as db, db:
            db.execute(
                "insert into log (hook, detail, inside) values (?, ?, ?)",
                (hook, detail, int(_inside())),
            )

    def instructions(self, view: TurnView) -> str | None:
        notes = (self.folder / "notes.txt").read_text().strip()
        self._log("instructions", f"{view.run_id} t{view.turn}.i{view.iteration}")
        return f"{notes} ({self.calls} calls so far)"

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        self._log("wrap_model", f"{call.run_id} {call.model_call_id}")
        question = _question(call.request)
        with closing(self._db()) as db:
            row = db.execute("select answer from cache where question = ?", (question,)).fetchone()
        if row is not None:
            return text(f"cached: {row[0]}")
        response = await next(call)
        self.calls += 1
        if not response.message.tool_calls:
            with closing(self._db()) as db, db:
                db.execute(
                    "insert or replace into cache values (?, ?)", (question, response.message.text)
                )
        return response

    async def review_batch(self, batch: ToolBatch, next: BatchNext) -> ToolBatch:
        refused = set((self.folder / "policy.txt").read_text().split())
        self._log("review_batch", f"{batch.run_id} {batch.model_call_id}")
        for i, call in enumerate(batch.calls):
            if call.name in refused:
                batch = batch.deny(i, f"the policy refuses {call.name}")
        return await next(batch)

    async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
        self._log("wrap_tool", f"{call.record.id} {call.tool.name} {call.args}")
        value = await next(call)
        self._log("wrap_tool", f"{call.record.id} returned")
        return f"{value} [audited]"

    async def recover_call(self, record: CallRecord) -> CallRecord | None:
        self._log("recover_call", f"{record.id} {record.name} {record.status}")
        if record.name != "hang":
            return None
        notes = (self.folder / "notes.txt").read_text().strip()
        return replace(
            record,
            rev=record.rev + 1,
            status="succeeded",
            result=f"recovered by the audit ({notes})",
            completed_at=datetime.now(UTC),
        )


class Brief(Extension):
    """A deterministic extension before ``Audited``: its text first, its wrap outermost."""

    name = "brief"
    temporal_io = False

    def instructions(self, view: TurnView) -> str | None:
        return "Be brief."

    async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
        # Passes the value on untouched: on Temporal a deterministic wrap around a tool that
        # runs in an activity gets the rendered outcome, not the body's value.
        return await next(call)


def _question(request: ModelRequest) -> str:
    users = [m for m in request.messages if m.role == "user"]
    return users[-1].text if users else ""


def answer(request: ModelRequest) -> ModelResponse:
    """Two calls first (``rm`` is refused by the policy), then what the run saw."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results and _question(request) == "Hang on.":
        return tool_calls(("hang", {"what": "a crash"}))
    if not results and _question(request) == "Plan tea.":
        return tool_calls(("create_task", {"title": "brew tea"}))
    if not results:
        return tool_calls(("lookup", {"q": "tea"}), ("rm", {"path": "/"}))
    said = " | ".join(" ".join(getattr(p, "content", "") for p in m.parts) for m in results)
    return text(f"{request.instructions} || {said}")


def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: What to look up.
    """
    return f"found {q}"


def rm(path: str) -> str:
    """Remove a path.

    Args:
        path: The path.
    """
    raise AssertionError("the policy refuses rm: its body never runs")


def prepare(folder: Path) -> None:
    """The files the extension reads: its notes and its policy."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("Notes from the file.\n")
    (folder / "policy.txt").write_text("rm\n")


def log(folder: Path) -> list[tuple[str, str, int]]:
    """The hooks' rows: (hook, detail, ran inside a workflow)."""
    with closing(sqlite3.connect(folder / "audit.db")) as db:
        rows = db.execute("select hook, detail, inside from log order by n").fetchall()
    return [(h, d, i) for h, d, i in rows]


def make_agent(
    folder: Path, calls: list[ModelRequest], *, first: Sequence[Extension] = ()
) -> sr.Agent:
    """The agent: ``first``, ``Brief``, then ``Audited``; the model records its requests."""

    def model(request: ModelRequest) -> ModelResponse:
        calls.append(request)
        return answer(request)

    return sr.Agent(
        name="audit",
        instructions="You are careful.",
        model=FunctionModel(model),
        tools=[lookup, rm, hang],
        extensions=[*first, Brief(), Audited(folder)],
    )


@dataclass
class Ran:
    """A run's end, as either engine tells it."""

    status: str
    text: str | None
    calls: list[tuple[str, str, str | None, str | None]]  # name, status, result, error


class Runner(Protocol):
    """The scenario's side of an engine."""

    async def __call__(self, run_id: str, input: str) -> Ran:
        """Run to its end."""
        ...

    async def crash(self, run_id: str, input: str) -> None:
        """Start, and crash while the ``hang`` body runs (its call started, not settled)."""
        ...

    async def resume(self, run_id: str) -> Ran:
        """Resume the crashed run to its end."""
        ...


class _Builtin:
    def __init__(self, agent: sr.Agent, store: sr.Store) -> None:
        self.agent = agent
        self.store = store
        self.runtime = sr.Runtime(store, agents=[agent])

    async def __call__(self, run_id: str, input: str) -> Ran:
        out = await self.runtime.run(self.agent, run_id=run_id, input=input)
        return await _ran(self.store, run_id, out.status, out.text)

    async def crash(self, run_id: str, input: str) -> None:
        HUNG.clear()
        going = asyncio.create_task(self.runtime.run(self.agent, run_id=run_id, input=input))
        await _until(lambda: _hung(self.store, run_id))
        going.cancel()  # the run is dropped mid-body, recording nothing: as a crash
        with contextlib.suppress(asyncio.CancelledError):
            await going

    async def resume(self, run_id: str) -> Ran:
        out = await self.runtime.resume(run_id)
        return await _ran(self.store, run_id, out.status, out.text)


@asynccontextmanager
async def builtin(agent: sr.Agent, folder: Path, **_: Any) -> AsyncIterator[Runner]:
    """The built-in engine: ``Runtime`` over a SQLite store."""
    store = sr.SqliteStore(folder / "runs.db")
    yield _Builtin(agent, store)
    await store.close()


class _Temporal:
    def __init__(
        self, app: Any, client: Any, folder: Path, keep: dict[str, Any] | None, replay: bool
    ) -> None:
        self.app, self.client, self.folder = app, client, folder
        self.store = app.store
        self.runs = app.runs(client)
        self.keep, self.replay = keep, replay

    async def __call__(self, run_id: str, input: str) -> Ran:
        await self.runs.start("audit", run_id=run_id, input=input)
        return await self._ended(run_id)

    async def crash(self, run_id: str, input: str) -> None:
        HUNG.clear()
        await self.runs.start("audit", run_id=run_id, input=input)
        await _until(lambda: _hung(self.store, run_id))  # its start recorded, the body going
        await self.client.get_workflow_handle(run_id).terminate("a crash, for the test")

    async def resume(self, run_id: str) -> Ran:
        await self.runs.resume(run_id)
        return await self._ended(run_id)

    async def _ended(self, run_id: str) -> Ran:
        out = await self.runs.result(run_id)
        history = await self.client.get_workflow_handle(run_id).fetch_history()
        if self.keep is not None:
            self.keep[run_id] = history
        if self.replay:
            before = log(self.folder)
            await self.app.replayer().replay_workflow(history)
            assert log(self.folder) == before, "the replay ran a hook of the I/O extension"
        return await _ran(self.store, run_id, out.status, out.text)


@asynccontextmanager
async def on_temporal(
    agent: sr.Agent,
    folder: Path,
    *,
    server: Any,
    keep: dict[str, Any] | None = None,
    replay: bool = True,
) -> AsyncIterator[Runner]:
    """Temporal with an in-process worker; each run's history is replayed once it ended.

    ``keep``: the histories (``WorkflowHistory``) by run id, when given; ``replay=False``
    skips the replay (to record the histories of a release whose hooks ran in the workflow).
    """
    from temporalio.client import Client

    from steadyrun.temporal import TemporalApp, TemporalOptions

    client = await Client.connect(server.target)
    queue = f"q-{uuid.uuid4().hex}"
    store = sr.SqliteStore(folder / "runs.db")
    app = TemporalApp(agents=[agent], store=store, options=TemporalOptions(task_queue=queue))
    async with app.worker(client):
        yield _Temporal(app, client, folder, keep, replay)
    await store.close()


HUNG: list[str] = []
"""The ``hang`` calls whose body started (it never returns)."""


async def hang(what: str, ctx: ToolContext) -> str:
    """Wait for something that never comes.

    Args:
        what: What to wait for.
        ctx: The call's context.
    """
    HUNG.append(ctx.call_id)
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _hung(store: sr.Store, run_id: str) -> bool:
    snap = await store.load(run_id)
    started = snap is not None and any(c.status == "running" for c in snap.calls)
    return started and bool(HUNG)


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(1200):  # a cap that only keeps a broken run from hanging
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("never happened")


async def _ran(store: sr.Store, run_id: str, status: str, said: str | None) -> Ran:
    snap = await store.load(run_id)
    assert snap is not None
    calls = [(c.name, c.status, c.result, c.error) for c in snap.calls]
    return Ran(status=status, text=said, calls=calls)


def fresh(prefix: str) -> str:
    """A run id of its own (workflow ids outlive a test on the shared server)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def record(server: Any, folder: Path, out: Path, *, crash: bool = False) -> None:
    """Record the first run's history of the scenario to ``out`` (``{run_id: json}``).

    How ``data/extmw_before.json`` (and, with ``crash``, ``data/extmw_recover_before.json``:
    a run crashed mid-body and resumed) were made, with main 7783891 (the hooks in the
    workflow).
    """
    import json

    prepare(folder)
    keep: dict[str, Any] = {}
    agent = make_agent(folder, [])
    async with on_temporal(agent, folder, server=server, keep=keep, replay=False) as run:
        if crash:
            await run.crash("extmw-recover-before", "Hang on.")
            await run.resume("extmw-recover-before")
        else:
            await run("extmw-before", "Is there tea?")
    out.write_text(json.dumps({k: h.to_json() for k, h in keep.items()}))  # noqa: ASYNC240
