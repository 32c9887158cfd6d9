"""``RunSnapshot.batch_calls``: the open batch's calls, and a loaded snapshot decodes only them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import pgkit
import steadyrun as sr
from steadyrun.control import Confirm
from steadyrun.records._stored import StoredSnapshot
from steadyrun.stores import PostgresStore
from steadyrun.testing import ScriptedModel, text, tool_calls

pg_dsn = pgkit.database_fixture(prefix="steadyrun_batchcalls")


def _agent(earlier: int, *, resumed: bool = False) -> sr.Agent:
    """``earlier`` iterations of one ``echo`` each, then a batch of two: a refund waits for a
    decision, an echo beside it runs."""

    @sr.tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What to return.
        """
        return text

    @sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Refund?"))
    def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        return f"refunded {order_id}"

    script = [tool_calls(("echo", {"text": f"e{i}"})) for i in range(earlier)]
    script.append(tool_calls(("refund", {"order_id": "A"}), ("echo", {"text": "beside"})))
    script.append(text("done"))
    if resumed:  # a new model object: the run goes on from the batch's results
        script = script[-1:]
    return sr.Agent(name="a", model=ScriptedModel(script), tools=[echo, refund])


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[sr.MemoryStore | sr.SqliteStore | PostgresStore]:
    if request.param == "memory":
        yield sr.MemoryStore()
    elif request.param == "sqlite":
        async with sr.SqliteStore(tmp_path / "runs.db") as s:
            yield s
    else:
        async with PostgresStore(request.getfixturevalue("pg_dsn")) as s:
            yield s


async def test_batch_calls_are_the_open_batch_in_call_order(
    store: sr.MemoryStore | sr.SqliteStore | PostgresStore,
) -> None:
    result = await sr.Runtime(store).run(_agent(5), run_id="r", input="go")
    assert result.status == "suspended"
    snap = await store.load("r")
    assert snap is not None
    batch = snap.batch_calls()
    assert [c.id for c in batch] == snap.checkpoint.batch and len(batch) == 2
    assert [(c.name, c.status) for c in batch] == [
        ("refund", "awaiting_decision"),
        ("echo", "succeeded"),
    ]
    by_id = {c.id: c for c in snap.calls}
    assert batch == [by_id[i] for i in snap.checkpoint.batch]
    assert len(snap.calls) == 7  # five earlier echoes too
    assert snap.batch_calls() == batch  # the same once every call is decoded


async def test_a_loaded_snapshot_decodes_the_batch_calls_alone(
    store: sr.MemoryStore | sr.SqliteStore | PostgresStore,
) -> None:
    await sr.Runtime(store).run(_agent(5), run_id="r", input="go")
    snap = await store.load("r")
    if not isinstance(snap, StoredSnapshot):
        pytest.skip("this store hands over decoded snapshots")
    read: list[int] = []
    reader = snap._call_reader

    def counting(raws: list[bytes]) -> list[sr.CallRecord]:
        read.append(len(raws))
        return reader(raws)

    snap._call_reader = counting
    (waiting,) = [c for c in snap.batch_calls() if c.status == "awaiting_decision"]
    assert sum(read) == 2  # the batch's two rows, not the run's seven
    await sr.Runtime(store).decide("r", waiting.id, approve=True)
    assert (await sr.Runtime(store, agents=[_agent(5, resumed=True)]).resume("r")).text == "done"


async def test_a_snapshot_without_an_open_batch_has_no_batch_calls() -> None:
    store = sr.MemoryStore()
    await sr.Runtime(store).run(_agent(0), run_id="r", input="go")
    snap = await store.load("r")
    assert snap is not None and snap.batch_calls()
    snap.checkpoint.batch = []
    assert snap.batch_calls() == []
