"""The same agents on Temporal: approvals and awaited results, records in the store, replay."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, TypeVar  # noqa: E402

from temporal_kit import build_app, effects  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun import NotPendingError, UnknownCallError  # noqa: E402
from steadyrun.temporal import TemporalRuns  # noqa: E402

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool]) -> T:
    """Poll ``probe`` until ``ok``; a generous cap only keeps a broken run from hanging."""
    for _ in range(600):
        value = await probe()
        if ok(value):
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"condition never held; last value: {value!r}")


async def connect(server: Any) -> Any:
    from temporalio.client import Client

    return await Client.connect(server.target)


async def test_approval_and_awaited_result_complete(temporal_server: Any, tmp_path: Path) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_app(tmp_path / "runs.db", tmp_path / "effects", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    async with app.worker(client):
        handle = await runs.start("support", run_id="ticket-1", input="I was charged twice.")
        pending = await eventually(lambda: runs.pending("ticket-1"), lambda p: len(p) == 2)
        kinds = {p.kind: p for p in pending}
        assert set(kinds) == {"decision", "result"}
        decision, awaited = kinds["decision"], kinds["result"]
        assert decision.name == "refund" and decision.prompt == "Refund 4999 cents?"
        assert awaited.payload == {"order_id": "A-1", "ask": "chargeback status"}
        assert await runs.status("ticket-1") == "suspended"
        assert effects(tmp_path / "effects") == []  # nothing ran before the approval

        # Refused writes come back as the same typed errors as Runtime's, and change nothing.
        with pytest.raises(NotPendingError):
            await runs.decide("ticket-1", awaited.call_id, approve=True)
        with pytest.raises(UnknownCallError):
            await runs.answer("ticket-1", "nope.w1", "x")

        await runs.decide("ticket-1", decision.call_id, approve=True, decided_by="ana")
        assert await runs.status("ticket-1") == "suspended"  # still waits for the bank
        await runs.settle("ticket-1", awaited.call_id, result="no chargeback")
        out = await handle.result()

        assert out.status == "completed"
        assert out.text == "done: refunded 4999 cents on A-1 | no chargeback"
        assert effects(tmp_path / "effects") == ["refund A-1 4999"]
        assert await runs.pending("ticket-1") == []
        snapshot = await runs.snapshot("ticket-1")
        assert snapshot.status == "completed"

        # The records reached the store: Runtime shows the run like any other.
        store = sr.SqliteStore(tmp_path / "runs.db")
        runtime = sr.Runtime(store)
        snap = await store.load("ticket-1")
        assert snap is not None
        assert snap.run.status == "completed" and snap.run.text == out.text
        statuses = {c.name: c.status for c in snap.calls}
        assert statuses == {
            "lookup_order": "succeeded",
            "refund": "succeeded",
            "bank_status": "succeeded",
        }
        refund_call = next(c for c in snap.calls if c.name == "refund")
        assert refund_call.decision is not None and refund_call.decision.decided_by == "ana"
        assert await runtime.pending("ticket-1") == []
        assert [m.role for m in snap.context] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        await store.close()

        # Determinism: the recorded history replays against the same agents.
        history = await handle.fetch_history()
    await app.replayer().replay_workflow(history)


async def test_replay_detects_a_changed_agent(temporal_server: Any, tmp_path: Path) -> None:
    """The replay check has teeth: the same history against a changed loop fails."""
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    async with app.worker(client):
        handle = await runs.start("counter", run_id="count-r", input="Go.")
        assert (await handle.result()).status == "completed"
        history = await handle.fetch_history()
    await app.replayer().replay_workflow(history)

    changed = build_app(tmp_path / "other.db", tmp_path / "fx", task_queue=queue)
    counter = changed.agent("counter")
    counter.limits = sr.Limits(max_iterations=3)  # the turn fails early: other commands
    with pytest.raises(Exception, match="[Nn]ondetermin"):
        await changed.replayer().replay_workflow(history)
