"""Write ``format1.db`` and ``format1.json``: a SQLite file as schema version 4 wrote it.

Run once, with the release that still wrote whole call records (schema version 4, documents of
format 1), from the repository's root:

    PYTHONPATH=src .venv/bin/python tests/stores/data/make_format1.py

``format1.json`` is what that release read back from the file: every run's snapshot, history,
context after each step and call records, the listing and the dumps. ``test_format1_file.py``
opens a copy of the file with the current release (which migrates it) and compares. Never
regenerate these files with a later release: they stand for files already on disk.

The runs: ``done`` (completed: two calls a turn, one failing, thinking), ``approve``
(suspended on a pending approval), ``cleared`` and ``summary`` (context rewrites: results
cleared, then a summary; the replaced log segments are kept), ``states`` (hand-written steps
with a call in each status, handed-over calls, a decision, an input request, a completion).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun._codec import to_plain
from steadyrun.chat import (
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from steadyrun.context import DEFAULT_SUMMARY_INSTRUCTION, ContextPolicy
from steadyrun.control import Confirm
from steadyrun.records import (
    CallCompletion,
    CallDecision,
    CallRecord,
    Checkpoint,
    ContextChange,
    InputRequest,
    RunRecord,
    Step,
)
from steadyrun.testing import FunctionModel, ScriptedModel, call, text, tool_calls

HERE = Path(__file__).resolve().parent
DB = HERE / "format1.db"
EXPECTED = HERE / "format1.json"
RUNS = ("done", "approve", "cleared", "summary", "states")


def looping(name: str, n: int, confirm_at: int | None, start: int = 0) -> sr.Agent:
    """Two calls a turn for ``n`` turns; every third fails; ``confirm_at`` waits for approval.

    ``start``: the turn the model answers first (a resumed run's model goes on from there).
    """

    def policy(view: Any) -> Confirm | None:
        return Confirm(prompt="ok?") if view.arguments["k"] == confirm_at else None

    @sr.tool(policy=policy)
    async def step(k: int) -> str:
        """One step.

        Args:
            k: Which.
        """
        if k % 3 == 2:
            raise ValueError(f"step {k} failed")
        return f"step {k} done: {'x' * (k * 10)}"

    script = [
        tool_calls(("step", {"k": k}), ("step", {"k": k + 100}), content=f"turn {k}")
        for k in range(n)
    ]
    script[0].message.parts.insert(0, ThinkingPart(text="think", signature="s=="))
    return sr.Agent(
        name=name,
        model=ScriptedModel([*script[start:], text("done")]),
        tools=[step],
        instructions="go",
    )


def rewriting(name: str, rounds: int, policy: ContextPolicy) -> sr.Agent:
    """Steps with 1 KB results, so the context policy clears or summarises them."""
    count = 0

    def respond(request: ModelRequest) -> sr.ModelResponse:
        nonlocal count
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            return text("SUMMARY: the agent made steps.")
        count += 1
        if count > rounds:
            return text("finished")
        return tool_calls(call("step", {"n": count}, id=f"c{count}"))

    @sr.tool(concurrency_key="")
    def step(n: int) -> str:
        """One step with a 1 KB result."""
        return f"step {n} " + "y" * 1000

    return sr.Agent(
        name=name,
        model=FunctionModel(respond),
        tools=[step],
        context=policy,
        limits=sr.Limits(max_iterations=1_000),
    )


T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)


def states_steps() -> list[Step]:
    """Two hand-written steps of a run whose calls stand in every status."""
    specs: list[tuple[str, dict[str, Any]]] = [
        ("queued", {}),
        ("running", {"started_at": T0}),
        ("waiting", {"handover": "await", "payload": {"ticket": 7}, "started_at": T0}),
        ("waiting", {"handover": "detached", "result": "receipt 9", "started_at": T0}),
        ("awaiting_decision", {}),
        (
            "awaiting_input",
            {
                "input_request": InputRequest(
                    wait_id="w1", prompt="name?", response_schema={"type": "string"}, state=[1]
                )
            },
        ),
        ("succeeded", {"result": "fine", "completed_at": T0, "notes": {"guard": "ok"}}),
        ("failed", {"error": "boom", "completed_at": T0}),
        ("interrupted", {"result": "unknown outcome", "error": "lost", "replayable": True}),
        ("needs_review", {"error": "side effects unknown"}),
        (
            "rejected",
            {
                "decision": CallDecision(
                    approve=False, reason="no", decided_by="ann", decided_at=T0
                ),
                "error": "rejected: no",
            },
        ),
        ("cancelled", {"error": "cancelled"}),
        (
            "succeeded",
            {
                "result": "done",
                "completion": CallCompletion(value={"answer": 42}, fixed=True),
                "decision": CallDecision(
                    approve=True,
                    arguments='{"i": 99}',
                    original_arguments='{"i": 12}',
                    decided_by="bob",
                    decided_at=T0,
                ),
            },
        ),
    ]
    calls: list[CallRecord] = []
    parts: list[ToolCallPart] = []
    for i, (status, extra) in enumerate(specs):
        arguments = json.dumps({"i": i})
        calls.append(
            CallRecord(
                id=f"m1.c{i + 1}",
                model_call_id="m1",
                provider_call_id=f"p{i}",
                name="tool",
                arguments=arguments,
                rev=1,
                status=status,
                **extra,
            )
        )
        parts.append(ToolCallPart(call_id=f"p{i}", name="tool", arguments=arguments))
    first = Step(
        run=RunRecord(
            run_id="states", agent="hand", status="running", created_at=T0, updated_at=T0, steps=1
        ),
        checkpoint=Checkpoint(phase="batch", model_calls=1, context_length=2),
        context=ContextChange(
            append=[
                Message(role="user", parts=[TextPart(text="do everything")]),
                Message(role="assistant", parts=list(parts)),
            ],
            start=0,
        ),
        calls=calls,
    )
    settled = [c for c in calls if c.status in ("succeeded", "failed", "rejected", "cancelled")]
    results = Message(
        role="tool",
        parts=[
            ToolResultPart(
                call_id=c.provider_call_id,
                name=c.name,
                content=(c.result if c.status == "succeeded" else c.error) or "",
                is_error=c.status != "succeeded",
            )
            for c in settled
        ],
        meta={"steadyrun.calls": ",".join(c.id for c in settled)},
    )
    second = Step(
        run=RunRecord(
            run_id="states",
            agent="hand",
            status="suspended",
            created_at=T0,
            updated_at=T0 + timedelta(seconds=1),
            steps=2,
        ),
        checkpoint=Checkpoint(phase="batch", model_calls=1, context_length=3),
        context=ContextChange(append=[results], start=2),
    )
    return [first, second]


async def record(store: sr.SqliteStore) -> dict[str, Any]:
    """Everything the release reads back from the file, as plain JSON data."""
    out: dict[str, Any] = {"runs": {}}
    for run_id in RUNS:
        snap = await store.load(run_id)
        assert snap is not None, run_id
        history = await store.history(run_id)
        out["runs"][run_id] = {
            "snapshot": to_plain(snap),
            "history": [to_plain(e) for e in history],
            # The last step of each segment: together they hold every stored message.
            "contexts": {
                str(e.step): [to_plain(m) for m in (await store.context_at(run_id, e.step)) or []]
                for e in history
                if e is history[-1] or history[history.index(e) + 1].segment != e.segment
            },
            "calls": {c.id: to_plain(await store.load_call(run_id, c.id)) for c in snap.calls},
        }
    dump = await store.dump_run("states")
    assert dump is not None and to_plain(dump.runs[0]) == out["runs"]["states"]["snapshot"]
    out["listing"] = [to_plain(s) for s in await store.list_runs(limit=100)]
    return out


async def main() -> None:
    for path in (DB, Path(f"{DB}-wal"), Path(f"{DB}-shm")):
        path.unlink(missing_ok=True)
    store = sr.SqliteStore(DB)
    runtime = sr.Runtime(store)
    done = await runtime.run(looping("loop", 3, None), run_id="done", input="start")
    assert done.status == "completed", done
    approve = await runtime.run(looping("confirm", 3, 1), run_id="approve", input="start")
    assert approve.status == "suspended", approve
    cleared = await runtime.run(
        rewriting(
            "clear",
            6,
            ContextPolicy(window=3_000, keep_rounds=2, clear_share=0.5, summary_tokens=200),
        ),
        run_id="cleared",
        input="go",
    )
    assert cleared.status == "completed", cleared
    summary = await runtime.run(
        rewriting(
            "summarise",
            10,
            ContextPolicy(
                window=6_000, keep_rounds=1, clear_share=0.3, summary_share=0.5, summary_tokens=200
            ),
        ),
        run_id="summary",
        input="go",
    )
    assert summary.status == "completed", summary
    for step in states_steps():
        await store.save_step("states", step)
    expected = await record(store)
    for run_id in ("cleared", "summary"):
        segments = {e["segment"] for e in expected["runs"][run_id]["history"]}
        assert len(segments) > 1, f"run {run_id!r} never rewrote its context"
    await store.close()
    with sqlite3.connect(DB) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")  # a smaller file; the rows stay as the release wrote them
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    assert version == 4, f"this script must run with the release of schema version 4, not {version}"
    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {DB.name} ({DB.stat().st_size} bytes) and {EXPECTED.name}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
