"""Late, duplicate and misdirected host writes: the same answer from both engines.

One table: each row is a host write (``decide``, ``answer``, ``settle``, ``send``, ``cancel``,
``resume``) on a run in some state (unknown, waiting, completed, cancelled) and what the
built-in engine answers, the documented contract (docs/handover.md, docs/service.md "Bad
input, per route"): a typed error, or ``None`` where the write is accepted and changes nothing
(a repeat of the first answer). The runs are prepared once per engine and module; one row changes
its run (a cancel), which no other row uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from enginekit import Driver, Scenario

from steadyrun import (
    ConflictError,
    NotPendingError,
    RunCancelledError,
    RunNotFoundError,
    SteadyrunError,
    UnknownCallError,
)


@dataclass
class Runs:
    """The runs the rows write to, by state, with their one call's ids."""

    ids: dict[str, str]  # state -> run id
    calls: dict[str, str]  # state -> call id
    waits: dict[str, str]  # state -> wait id (of the run's input request)


Prepared = tuple[Scenario, str, str | None]  # the run, its call, the call's wait (if any)


async def _waiting(engine: Driver) -> Prepared:
    run = Scenario(engine, "wire")
    await run.start("Wire 80.")
    return run, (await run.waits_for("decision")).call_id, None


async def _decided(engine: Driver) -> Prepared:
    run = Scenario(engine, "wire")
    await run.start("Wire 81.")
    item = await run.waits_for("decision")
    await engine.decide(run.run_id, item.call_id, approve=False, reason="no")
    assert (await run.ended()).status == "completed"
    return run, item.call_id, None


async def _answered(engine: Driver) -> Prepared:
    run = Scenario(engine, "pay")
    await run.start("Pay P-1.")
    item = await run.waits_for("input")
    assert item.wait_id is not None
    await engine.answer(run.run_id, item.wait_id, "amex")
    assert (await run.ended()).status == "completed"
    return run, item.call_id, item.wait_id


async def _settled(engine: Driver) -> Prepared:
    run = Scenario(engine, "bank")
    await run.start("Any chargeback on B-1?")
    item = await run.waits_for("result")
    await engine.settle(run.run_id, item.call_id, result="none")
    assert (await run.ended()).status == "completed"
    return run, item.call_id, None


async def _cancelled(engine: Driver) -> Prepared:
    run = Scenario(engine, "pay")
    await run.start("Pay P-2.")
    item = await run.waits_for("input")
    await engine.cancel(run.run_id)
    assert (await run.ended()).status == "cancelled"
    return run, item.call_id, item.wait_id


async def _failed(engine: Driver) -> Prepared:
    run = Scenario(engine, "flaky")
    await run.start("Charge C-1.")
    await run.ended()
    await engine.send(run.run_id, "Again?")  # the model is down for this turn
    assert (await run.ended(turn=2)).status == "failed"
    (call,) = (await run.snapshot()).calls  # the first turn's charge: succeeded
    return run, call.id, None


PREPARE: dict[str, Callable[[Driver], Awaitable[Prepared]]] = {
    "waiting": _waiting,  # for a decision
    "decided": _decided,  # rejected, then completed
    "answered": _answered,  # an input request answered, then completed
    "settled": _settled,  # an awaited result settled, then completed
    "cancelled": _cancelled,  # while its call waited for an answer
    "failed": _failed,  # its model failed in its second turn
    "failed, to cancel": _failed,  # the same, for the one row that changes its run
}
_PREPARED: dict[Path, Runs] = {}


@pytest.fixture
async def runs(engine: Driver) -> Runs:
    """The table's runs on this test's engine (prepared by the module's first row)."""
    if engine.ledger not in _PREPARED:
        prepared = await asyncio.gather(*(prepare(engine) for prepare in PREPARE.values()))
        runs = Runs(
            ids={"unknown": "nope-never-started"},
            calls={"unknown": "m1.c1"},
            waits={"unknown": "m1.c1.w1"},
        )
        for state, (run, call, wait) in zip(PREPARE, prepared, strict=True):
            runs.ids[state] = run.run_id
            runs.calls[state] = call
            runs.waits[state] = wait or f"{call}.w1"  # a wait id the call never had
        _PREPARED[engine.ledger] = runs
    return _PREPARED[engine.ledger]


Write = Callable[[Driver, str, Runs], Awaitable[Any]]


def decide(approve: bool, call: str | None = None) -> Write:
    def write(e: Driver, state: str, r: Runs) -> Awaitable[Any]:
        reason = None if approve else "no"
        return e.decide(r.ids[state], call or r.calls[state], approve=approve, reason=reason)

    return write


def answer(response: Any, wait: str | None = None) -> Write:
    return lambda e, state, r: e.answer(r.ids[state], wait or r.waits[state], response)


def settle(result: str, call: str | None = None) -> Write:
    return lambda e, state, r: e.settle(r.ids[state], call or r.calls[state], result=result)


def send(e: Driver, state: str, r: Runs) -> Awaitable[Any]:
    return e.send(r.ids[state], "one more thing")


def cancel(e: Driver, state: str, r: Runs) -> Awaitable[Any]:
    return e.cancel(r.ids[state])


def resume(e: Driver, state: str, r: Runs) -> Awaitable[Any]:
    return e.resume(r.ids[state])


# (row id, the write, the run's state, what the built-in engine answers: None is accepted)
ROWS: list[tuple[str, Write, str, type[SteadyrunError] | None]] = [
    # an unknown run
    ("decide-unknown-run", decide(True), "unknown", RunNotFoundError),
    ("answer-unknown-run", answer("visa"), "unknown", RunNotFoundError),
    ("settle-unknown-run", settle("done"), "unknown", RunNotFoundError),
    ("send-unknown-run", send, "unknown", RunNotFoundError),
    ("cancel-unknown-run", cancel, "unknown", RunNotFoundError),
    ("resume-unknown-run", resume, "unknown", RunNotFoundError),
    # an unknown call (or wait) id of a waiting run
    ("decide-unknown-call", decide(True, "m9.c9"), "waiting", UnknownCallError),
    ("answer-unknown-wait", answer("visa", "m9.c9.w1"), "waiting", UnknownCallError),
    ("answer-not-a-wait-id", answer("visa", "zzz"), "waiting", UnknownCallError),
    ("settle-unknown-call", settle("done", "m9.c9"), "waiting", UnknownCallError),
    # a write the waiting call does not wait for
    ("answer-a-call-waiting-for-a-decision", answer("visa"), "waiting", NotPendingError),
    ("settle-a-call-waiting-for-a-decision", settle("done"), "waiting", NotPendingError),
    # a completed run: the first answer was final
    ("decide-same-again-after-the-end", decide(False), "decided", None),
    ("decide-otherwise-after-the-end", decide(True), "decided", ConflictError),
    ("answer-same-again-after-the-end", answer("amex"), "answered", None),
    ("answer-otherwise-after-the-end", answer("visa"), "answered", ConflictError),
    ("settle-same-again-after-the-end", settle("none"), "settled", None),
    ("settle-otherwise-after-the-end", settle("some"), "settled", ConflictError),
    ("decide-an-answered-call", decide(True), "answered", NotPendingError),
    ("answer-a-decided-call", answer("visa"), "decided", NotPendingError),
    ("settle-a-rejected-call", settle("done"), "decided", ConflictError),
    ("cancel-a-completed-run", cancel, "decided", NotPendingError),
    ("resume-a-completed-run", resume, "decided", NotPendingError),
    # a failed run (its model failed in its second turn; the first turn's call succeeded)
    ("decide-on-a-failed-run", decide(True), "failed", NotPendingError),
    ("answer-on-a-failed-run", answer("visa"), "failed", NotPendingError),
    ("settle-same-on-a-failed-run", settle("charged C-1"), "failed", None),
    ("settle-otherwise-on-a-failed-run", settle("other"), "failed", ConflictError),
    ("cancel-a-failed-run", cancel, "failed, to cancel", None),
    # a cancelled run (its call was cancelled while it waited for an answer)
    ("decide-on-a-cancelled-run", decide(True), "cancelled", NotPendingError),
    ("answer-on-a-cancelled-run", answer("visa"), "cancelled", NotPendingError),
    ("settle-on-a-cancelled-run", settle("done"), "cancelled", ConflictError),
    ("send-to-a-cancelled-run", send, "cancelled", RunCancelledError),
    ("cancel-a-cancelled-run", cancel, "cancelled", None),
    ("resume-a-cancelled-run", resume, "cancelled", RunCancelledError),
]


@pytest.mark.parametrize(
    ("write", "state", "expected"), [pytest.param(*r[1:], id=r[0]) for r in ROWS]
)
async def test_a_write_is_answered_as_on_the_builtin_engine(
    engine: Driver,
    runs: Runs,
    write: Write,
    state: str,
    expected: type[SteadyrunError] | None,
) -> None:
    try:
        await write(engine, state, runs)
    except SteadyrunError as exc:
        assert expected is not None and isinstance(exc, expected), f"{type(exc).__name__}: {exc}"
        return
    assert expected is None, f"accepted; the built-in engine raises {expected.__name__}"
