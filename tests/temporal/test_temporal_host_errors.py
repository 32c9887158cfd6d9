"""Every public method of ``TemporalRuns`` raises steadyrun's typed errors, never temporalio's.

Per method: a run id with no workflow, and a run in a state where the action cannot apply
(ended, cancelled, or not waiting for it).
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_parity_kit import build_parity_app  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

from steadyrun import (  # noqa: E402
    NotPendingError,
    RunCancelledError,
    RunNotFoundError,
    UnknownCallError,
    UsageError,
)
from steadyrun.temporal import TemporalRuns  # noqa: E402


@dataclass
class Runs:
    runs: TemporalRuns
    unknown: str  # no workflow has this id
    done: str  # completed
    waiting: str  # suspended, waiting for a decision on ``call``
    call: str
    cancelled: str


@pytest.fixture
async def states(temporal_server: Any, tmp_path: Path) -> AsyncIterator[Runs]:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    tag = uuid.uuid4().hex
    async with app.worker(client):
        await runs.run("chat", run_id=f"done-{tag}", input="Hello.")
        await runs.start("wire", run_id=f"wait-{tag}", input="Wire 20.")
        (item,) = await eventually(lambda: runs.pending(f"wait-{tag}"), lambda p: len(p) == 1)
        await runs.start("wire", run_id=f"gone-{tag}", input="Wire 30.")
        await eventually(lambda: runs.pending(f"gone-{tag}"), lambda p: len(p) == 1)
        await runs.cancel(f"gone-{tag}")
        with pytest.raises(RunCancelledError):
            await runs.result(f"gone-{tag}")
        yield Runs(runs, f"never-{tag}", f"done-{tag}", f"wait-{tag}", item.call_id, f"gone-{tag}")


async def test_start_and_run(states: Runs) -> None:
    runs = states.runs
    with pytest.raises(RunCancelledError):
        await runs.start("chat", run_id=states.cancelled, input="Again.")
    with pytest.raises(RunCancelledError):
        await runs.run("chat", run_id=states.cancelled, input="Again.")
    with pytest.raises(UsageError, match="no agent named 'nobody'"):
        await runs.run("nobody", run_id=f"nobody-{uuid.uuid4().hex}", input="Hi.")


async def test_result(states: Runs) -> None:
    with pytest.raises(RunNotFoundError):
        await states.runs.result(states.unknown)
    with pytest.raises(RunCancelledError):
        await states.runs.result(states.cancelled)


async def test_resume(states: Runs) -> None:
    with pytest.raises(RunNotFoundError):
        await states.runs.resume(states.unknown)
    with pytest.raises(RunCancelledError):
        await states.runs.resume(states.cancelled)
    with pytest.raises(NotPendingError, match="nothing to resume"):  # as App.resume
        await states.runs.resume(states.done)
    await states.runs.resume(states.waiting)  # waiting for a person: left as it is
    assert await states.runs.status(states.waiting) == "suspended"


@pytest.mark.parametrize("query", ["pending", "snapshot", "status"])
async def test_queries(states: Runs, query: str) -> None:
    with pytest.raises(RunNotFoundError):
        await getattr(states.runs, query)(states.unknown)
    await getattr(states.runs, query)(states.cancelled)  # an ended run can still be read


async def test_decide(states: Runs) -> None:
    runs = states.runs
    with pytest.raises(RunNotFoundError):
        await runs.decide(states.unknown, "c1", approve=True)
    with pytest.raises(UnknownCallError):  # as Runtime: the run has no such call
        await runs.decide(states.done, "c1", approve=True)
    with pytest.raises(UnknownCallError):
        await runs.decide(states.cancelled, "c1", approve=True)
    with pytest.raises(UnknownCallError):
        await runs.decide(states.waiting, "nope", approve=True)


async def test_answer(states: Runs) -> None:
    runs = states.runs
    with pytest.raises(RunNotFoundError):
        await runs.answer(states.unknown, "c1.w1", "yes")
    with pytest.raises(UnknownCallError):  # as Runtime: the run has no such call
        await runs.answer(states.done, "c1.w1", "yes")
    with pytest.raises(UnknownCallError):
        await runs.answer(states.cancelled, "c1.w1", "yes")
    with pytest.raises(UnknownCallError):
        await runs.answer(states.waiting, "nope.w1", "yes")


async def test_settle(states: Runs) -> None:
    runs = states.runs
    with pytest.raises(RunNotFoundError):
        await runs.settle(states.unknown, "c1", result="ok")
    with pytest.raises(UnknownCallError):  # as Runtime: the run has no such call
        await runs.settle(states.done, "c1", result="ok")
    with pytest.raises(UnknownCallError):
        await runs.settle(states.cancelled, "c1", result="ok")
    with pytest.raises(NotPendingError):  # it waits for a decision, not a result
        await runs.settle(states.waiting, states.call, result="ok")
    with pytest.raises(UsageError):
        await runs.settle(states.waiting, states.call)


async def test_send(states: Runs) -> None:
    runs = states.runs
    with pytest.raises(RunNotFoundError):
        await runs.send(states.unknown, "Hi.")
    with pytest.raises(RunNotFoundError):
        await runs.send(states.unknown, "Hi.", wait=False)
    with pytest.raises(RunCancelledError):
        await runs.send(states.cancelled, "Hi.")
    with pytest.raises(RunCancelledError):
        await runs.send(states.cancelled, "Hi.", wait=False)
    sent = await runs.send(states.waiting, "Hi.", id="m1")  # a suspended run takes input
    assert sent is not None and (await runs.send(states.waiting, "Hi.", id="m1")) == sent


async def test_cancel(states: Runs) -> None:
    runs = states.runs
    with pytest.raises(RunNotFoundError):
        await runs.cancel(states.unknown)
    with pytest.raises(NotPendingError, match="nothing to cancel"):
        await runs.cancel(states.done)
    await runs.cancel(states.cancelled)  # again: changes nothing
