"""What a resume of an approved call costs before its first model call, counted (not timed).

The peer harness's ``resume`` job: a run of one tool call per model call pauses for a person's
approval; a new store object and runtime resume it after the decision. Up to the first model
call the resume must make durable: its claim, the call's start (before the tool's body runs)
and the step that takes the result in (before the model is called again). Nothing more: the
approval is already stored, so the call need not be written ``queued`` on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_sqlite_first_open import _traced_connect

import countkit
import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.testing import FunctionModel, call, text, tool_calls

RUN = "resumed"
PAUSE = 4
TOTAL = 8


def _agent(first_call: list[countkit.Counter]) -> sr.Agent:
    """The harness's loop; the call of step ``PAUSE`` waits for approval."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        k = sum(1 for m in request.messages if m.role == "tool" for _ in m.parts)
        for counter in first_call:
            counter.stop()
        first_call.clear()
        if k < TOTAL:
            return tool_calls(call("echo", {"text": countkit.echo_text(k)}, id=f"call_{k}"))
        return text("done")

    def policy(view: CallView) -> Confirm | None:
        return Confirm(prompt="ok?") if view.arguments["text"].startswith(f"{PAUSE:06d}") else None

    @sr.tool(policy=policy)
    def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: What to return.
        """
        return text

    return sr.Agent(name="loop", model=FunctionModel(respond), tools=[echo])


async def _resume_counted(path: Path, *, approve: bool) -> tuple[countkit.Counts, Any]:
    async with sr.SqliteStore(path) as store:
        result = await sr.Runtime(store).run(_agent([]), run_id=RUN, input="go")
        assert result.status == "suspended"
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(path) as store:
            armed: list[countkit.Counter] = [counter]
            runtime = sr.Runtime(store, agents=[_agent(armed)], live=False)
            snap = await store.load(RUN)
            assert snap is not None
            (waiting,) = [c for c in snap.calls if c.status == "awaiting_decision"]
            await runtime.decide(RUN, waiting.id, approve=approve)
            counter.start()
            done = await runtime.resume(RUN)
            assert done.status == "completed", done.error
            assert not armed, "the model was never called after the resume"
            return counter.counts, done


async def test_a_resumed_approved_call_makes_three_commits_before_the_model_call(
    tmp_path: Path,
) -> None:
    counts, done = await _resume_counted(tmp_path / "runs.db", approve=True)
    # The claim, the call's start, the step with its result: the approval is stored already.
    assert counts.commits == 3, counts.statement_log
    # Only the last two wait for an fsync: a claim lost with the machine is lost with the
    # process that held it, and the call's start, synced, makes it durable too.
    assert counts.synced_commits == 2, counts.statement_log
    statuses = [c.status for c in done.calls]
    assert statuses.count("succeeded") == TOTAL


async def test_a_resumed_rejected_call_is_settled_with_the_step(tmp_path: Path) -> None:
    counts, done = await _resume_counted(tmp_path / "runs.db", approve=False)
    # The claim, the rejection, the step that tells the model: the rejection stays durable
    # before its observers hear of it, as before.
    assert counts.commits <= 3, counts.statement_log
    assert counts.synced_commits <= 2, counts.statement_log
    assert [c.status for c in done.calls].count("rejected") == 1


async def test_a_run_start_syncs_its_input_and_step_not_its_claim(tmp_path: Path) -> None:
    # ``Runtime.run`` up to the first model call: the claim, the input (durable when its send
    # returns) and the run's first step. The input's commit, synced, makes the claim durable.
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(tmp_path / "runs.db") as store:
            await store.list_runs(limit=1)
            armed: list[countkit.Counter] = [counter]
            runtime = sr.Runtime(store, live=False)
            counter.start()
            result = await runtime.run(_agent(armed), run_id=RUN, input="go")
    assert result.status == "suspended"
    assert not armed, "the model was never called"
    counts = counter.counts
    assert counts.commits == 3, counts.statement_log
    assert counts.synced_commits == 2, counts.statement_log


async def test_a_decision_is_one_write_transaction(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        result = await sr.Runtime(store).run(_agent([]), run_id=RUN, input="go")
        (waiting,) = [c for c in result.calls if c.status == "awaiting_decision"]
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(path) as store:
            runtime = sr.Runtime(store, live=False)
            await store.list_runs(limit=1)
            counter.start()
            decided = await runtime.decide(RUN, waiting.id, approve=True)
            counter.stop()
    assert decided.decision is not None and decided.decision.approve
    # The store's write reads the call and decides inside its transaction: no read before it.
    assert counter.counts.transactions == 1, counter.counts.statement_log
    assert counter.counts.commits == 1
    assert counter.counts.synced_commits == 1  # a decision is durable when decide returns


async def test_decide_and_resume_read_the_run_once_and_no_past_call(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # The harness's sequence after a restart: the decision, then the resume, up to the model
    # call. The run is read whole once (the resume's load); of its call rows only the open
    # batch's is decoded (by the run, and by the store merging its start and its result).
    from steadyrun.stores import _call_rows

    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        result = await sr.Runtime(store).run(_agent([]), run_id=RUN, input="go")
        (waiting,) = [c for c in result.calls if c.status == "awaiting_decision"]
    rows: list[int] = []
    decode_rows = _call_rows.decode_rows

    def counted_rows(raws: Any) -> Any:
        raws = list(raws)
        rows.append(len(raws))
        return decode_rows(raws)

    for module in ("_call_rows", "_call_rows_sql", "_sqlite", "_lifecycle_sqlite"):
        target = getattr(__import__("steadyrun.stores", fromlist=[module]), module)
        if getattr(target, "decode_rows", None) is decode_rows:
            monkeypatch.setattr(target, "decode_rows", counted_rows)
    async with sr.SqliteStore(path) as store:
        reads = {"load": 0, "load_call": 0}
        for name in reads:
            method = getattr(store, name)

            async def counted(*args: Any, _m: Any = method, _n: str = name) -> Any:
                reads[_n] += 1
                return await _m(*args)

            monkeypatch.setattr(store, name, counted)
        at_model: list[int] = []

        class AtModel(countkit.Counter):
            def stop(self) -> None:
                at_model.extend(rows)
                at_model.append(sum(reads.values()))

        armed: list[countkit.Counter] = [AtModel()]
        runtime = sr.Runtime(store, agents=[_agent(armed)], live=False)
        await runtime.decide(RUN, waiting.id, approve=True)
        done = await runtime.resume(RUN)
    assert done.status == "completed", done.error
    *decoded, read = at_model
    assert read == 1 and reads["load_call"] == 0  # by the model call: the resume's load only
    # Until the model call: the decision's own row, then the open batch's (the run reading it,
    # the store merging its start and its result); the PAUSE calls before it stay stored.
    assert decoded and max(decoded) == 1 and sum(decoded) <= 4, decoded


async def test_a_load_leaves_no_sort_to_sqlite(tmp_path: Path, monkeypatch: Any) -> None:
    # SQLite sorted the call rows (by rowid) and the blocks (by position) of every load in a
    # temporary B-tree, copying each row into it once more (the harness's N=400 run: 201 rows
    # of 70 KB and 202 of 66 KB); the store orders the few ints itself. The context is read in
    # its key's order, which needs no sort.
    import sqlite3

    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        result = await sr.Runtime(store).run(_agent([]), run_id=RUN, input="go")
        assert result.status == "suspended"
        expected = await store.load(RUN)
    traced: list[str] = []
    _traced_connect(monkeypatch, traced)
    async with sr.SqliteStore(path) as store:
        await store.list_runs(limit=1)
        traced.clear()
        snap = await store.load(RUN)
    monkeypatch.undo()
    assert snap == expected and [c.id for c in snap.calls] == [c.id for c in result.calls]
    assert [b.position for b in snap.blocks] == sorted(b.position for b in snap.blocks)
    selects = [s for s in traced if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 4  # the run, its context, its calls, its blocks
    with sqlite3.connect(path) as conn:
        plans = {s: [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + s)] for s in selects}
    assert not {s: p for s, p in plans.items() if any("TEMP B-TREE" in x for x in p)}, plans
