"""Usage survives crashes exactly: a budgeted run killed with SIGKILL at many points.

A child process (``budget_child.py``) runs an agent with a token budget and kills itself at
a model call, after a response arrived (before it is saved), in a tool, or at a SQL
statement; fresh children resume it. The model's usage is a function of its request, so what
each stored response cost is known from the stored context: after every kill and resume,
the run's usage equals the sum over its stored responses (nothing counted twice, nothing
lost), the budget stopped the run exactly when that sum reached it, the cost is priced from
the same usage, and raising the budget and resuming (killed again) completes the run.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from budget_child import BUDGET, PRICES, RUN_ID, usage_of  # noqa: E402

import pgkit  # noqa: E402
import steadyrun as sr  # noqa: E402
from steadyrun.chat import Usage  # noqa: E402
from steadyrun.records import RunSnapshot  # noqa: E402

CHILD = Path(__file__).with_name("budget_child.py")


def child(store: str, mode: str, kill_at: str = "0") -> tuple[int, dict[str, Any] | None, str]:
    proc = subprocess.run(
        [sys.executable, str(CHILD), "--store", store, "--mode", mode, "--kill-at", kill_at],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    return proc.returncode, report, proc.stderr


def load(store: str) -> RunSnapshot:
    async def read() -> RunSnapshot | None:
        kind, _, where = store.partition(":")
        if kind == "sqlite":
            opened: sr.MemoryStore | sr.SqliteStore | Any = sr.SqliteStore(where)
        else:
            schema, _, dsn = where.partition("|")
            opened = sr.PostgresStore(dsn, schema=schema)
        try:
            return await opened.load(RUN_ID)
        finally:
            await opened.close()

    snap = asyncio.run(read())
    assert snap is not None
    return snap


def stored_responses(snap: RunSnapshot) -> list[Usage]:
    """What each response in the stored context cost (its request: the context before it)."""
    context = snap.context
    return [usage_of(context[:i]) for i, m in enumerate(context) if m.role == "assistant"]


def check_usage(snap: RunSnapshot, report: dict[str, Any]) -> None:
    """The run's usage is the sum of its stored responses, and the report says the same."""
    each = stored_responses(snap)
    total = sum(each, Usage())
    usage = snap.run.usage
    assert (usage.requests, usage.input_tokens, usage.output_tokens) == (
        total.requests,
        total.input_tokens,
        total.output_tokens,
    )
    assert report["usage"] == {"requests": usage.requests, "total": usage.total_tokens}
    assert report["cost"] == pytest.approx(PRICES["budget-model"].cost(usage))


def settle(store: str, mode: str = "resume") -> dict[str, Any]:
    """Resume in fresh children until one finishes (a kill may leave a claim to expire)."""
    code, report, err = child(store, mode)
    assert code == 0 and report is not None, err
    return report


def scenario(store: str, point: str, reference: dict[str, Any]) -> bool:
    """Kill at ``point`` while running and again while raising; whether a kill happened."""
    code, report, err = child(store, "run", point)
    killed = code == -9
    assert killed or code == 0, err
    stopped = settle(store, "run") if killed else report
    assert stopped is not None
    snap = load(store)
    check_usage(snap, stopped)
    # The budget stopped it exactly when its stored usage reached the limit: not before (the
    # last call was allowed) and with the same count the check saw.
    assert stopped["status"] == "suspended"
    assert stopped["exceeded"] == ["total_tokens", snap.run.usage.total_tokens]
    last = stored_responses(snap)[-1]
    assert snap.run.usage.total_tokens - last.total_tokens < BUDGET <= snap.run.usage.total_tokens
    if not killed:  # the kill point lies beyond the budget: the same as the reference
        assert stopped == reference["stopped"]

    code, report, err = child(store, "raise", point)
    assert code in (0, -9), err
    done = settle(store) if code == -9 or report is None else report
    if done["status"] != "completed":  # killed before the raise was saved: raise again
        done = settle(store, "raise")
    snap = load(store)
    assert done["status"] == "completed" and done["exceeded"] is None
    check_usage(snap, done)
    return killed


def reference_run(store: str) -> dict[str, Any]:
    stopped = settle_run(store)
    done = settle(store, "raise")
    snap = load(store)
    check_usage(snap, done)
    assert done["status"] == "completed" and snap.context[-1].text == "Finished."
    return {"stopped": stopped, "done": done}


def settle_run(store: str) -> dict[str, Any]:
    code, report, err = child(store, "run")
    assert code == 0 and report is not None, err
    return report


def points(reference: dict[str, Any], sql_points: int) -> list[str]:
    counts = reference["stopped"]["counts"]
    chosen = ["model:2", "model:4", "response:1", "response:3", "response:6", "tool:2", "tool:5"]
    n = counts.get("sql", 0)
    chosen += [f"sql:{1 + i * n // sql_points}" for i in range(sql_points)]
    return chosen


def test_usage_is_exact_after_sigkill_and_resume_on_sqlite(tmp_path: Path) -> None:
    ref_store = f"sqlite:{tmp_path / 'reference.db'}"
    reference = reference_run(ref_store)
    assert reference["stopped"]["usage"]["requests"] == 6  # 375 < 400 <= 510 tokens
    kills = 0
    for i, point in enumerate(points(reference, sql_points=8)):
        kills += scenario(f"sqlite:{tmp_path / f'run{i}.db'}", point, reference)
    assert kills >= 10  # the kill points were reached, not skipped


def test_usage_is_exact_after_sigkill_and_resume_on_postgres() -> None:
    with pgkit.fresh_database_sync("steadyrun_budget") as dsn:

        def store() -> str:
            return f"postgres:b_{uuid.uuid4().hex[:10]}|{dsn}"

        reference = reference_run(store())
        kills = 0
        for point in ["response:2", "tool:3", *points(reference, sql_points=3)[-3:]]:
            kills += scenario(store(), point, reference)
        assert kills >= 4
