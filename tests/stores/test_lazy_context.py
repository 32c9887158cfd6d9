"""A SQL store's load decodes no message of the context; the messages are decoded when read.

Issue 20 item 3 ("open batch first, older history lazily"): an approval screen, or a resume
deciding the call it waits for, loads the run and reads its open batch. The context (N=400:
402 messages, 0.5 MB, more than half of the load) is decoded when the run first reads it (to
hand it to the model); a call row that refers to a message of the log decodes that message
alone. A context document that does not fit its type is then refused when it is read, with
the same ``StoreError``, as a call or a block already was; a resume that meets it fails with
that error and leaves the run as it was.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from lazykit import RUN, lazy_agent

import pgkit
import steadyrun as sr
from steadyrun import _codec
from steadyrun._codec import FORMAT
from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import Message, TextPart
from steadyrun.stores import PostgresStore

pg_dsn = pgkit.database_fixture()


class Messages:
    """Counts the messages the codec decodes (each one, in whatever batch)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.count = 0
        reader = _codec._reader

        def counted(tp: Any) -> Any:
            inner = reader(tp)
            if tp is not Message:
                return inner
            outer = self

            class Counted:
                def validate_python(self, raws: list[Any]) -> Any:
                    outer.count += len(raws)
                    return inner.validate_python(raws)

            return Counted()

        monkeypatch.setattr(_codec, "_reader", counted)


@pytest.fixture(params=["sqlite", "postgres"])
def store_of(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A function that opens a new store object on the same database each time."""
    if request.param == "sqlite":
        return lambda: sr.SqliteStore(tmp_path / "runs.db")
    dsn = request.getfixturevalue("pg_dsn")
    return lambda: PostgresStore(dsn)


async def test_a_load_decodes_no_message_and_the_open_batch_only_its_own(
    store_of: Any, monkeypatch: Any
) -> None:
    async with store_of() as store:
        suspended = await sr.Runtime(store).run(lazy_agent(8), run_id=RUN, input="start")
        assert suspended.status == "suspended"
        eager = await store.load(RUN)
        assert eager is not None
        expected_batch, expected_context = eager.batch_calls(), list(eager.context)
    async with store_of() as store:
        messages = Messages(monkeypatch)
        snap = await store.load(RUN)
        assert snap is not None
        assert messages.count == 0
        # The batch's two calls refer to their arguments (one assistant message) and one has a
        # result (one tool message): those are decoded, not the other 30 messages.
        assert snap.batch_calls() == expected_batch
        assert 0 < messages.count <= 2 * len(expected_batch)
        assert snap.context == expected_context
        assert messages.count <= 2 * len(expected_batch) + len(expected_context)


async def test_call_rows_read_the_context_as_loaded_not_as_changed_since(store_of: Any) -> None:
    async with store_of() as store:
        assert (await sr.Runtime(store).run(lazy_agent(4), run_id=RUN, input="start")).status == (
            "suspended"
        )
        expected = (await store.load(RUN)).calls  # type: ignore[union-attr]
        for touch in ("before", "after"):
            snap = await store.load(RUN)
            assert snap is not None
            if touch == "after":
                snap.batch_calls()  # one call resolved from single messages first
            snap.context.clear()  # what a run does to its context later
            snap.context.append(Message(role="user", parts=[TextPart(text="not the log")]))
            assert snap.calls == expected, touch


async def _set_message(where: Any, idx: int, raw: bytes) -> bytes:
    """Write the stored context row ``idx`` behind the store's back; return what it held."""
    if isinstance(where, Path):
        with sqlite3.connect(where) as conn:
            old = conn.execute(
                "SELECT message FROM context WHERE run_id = ? AND idx = ?", (RUN, idx)
            ).fetchone()[0]
            conn.execute(
                "UPDATE context SET message = ? WHERE run_id = ? AND idx = ?", (raw, RUN, idx)
            )
        return bytes(old)
    async with await psycopg.AsyncConnection.connect(where, autocommit=True) as pg:
        cur = await pg.execute(
            "SELECT message FROM steadyrun.context WHERE run_id = %s AND idx = %s", (RUN, idx)
        )
        (old,) = await cur.fetchone()  # type: ignore[misc]
        await pg.execute(
            "UPDATE steadyrun.context SET message = %s WHERE run_id = %s AND idx = %s",
            (raw, RUN, idx),
        )
    return bytes(old)


async def test_a_context_document_that_does_not_fit_is_refused_when_read(
    store_of: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with store_of() as store:
        suspended = await sr.Runtime(store).run(lazy_agent(3), run_id=RUN, input="start")
        waiting = [c for c in suspended.calls if c.status == "awaiting_decision"]
        await sr.Runtime(store).decide(RUN, waiting[0].id, approve=True)
    where: Any = tmp_path / "runs.db"
    if "postgres" in request.node.callspec.id:
        where = request.getfixturevalue("pg_dsn")
    bad = json.dumps({"format": FORMAT, "data": {"role": "robot"}}, separators=(",", ":")).encode()
    good = await _set_message(where, 1, bad)
    async with store_of() as store:
        snap = await store.load(RUN)
        assert snap is not None and snap.batch_calls()  # what does not refer to it reads
        with pytest.raises(StoreError, match="does not match Message") as info:
            snap.context  # noqa: B018
        assert not isinstance(info.value, FormatVersionError)
        runtime = sr.Runtime(store, agents=[lazy_agent(3, resumed=True)])
        for _ in range(2):  # the claim is given back: the second resume meets the same error
            with pytest.raises(StoreError, match="does not match Message"):
                await runtime.resume(RUN)
        after = await store.load(RUN)
        assert after is not None and after.checkpoint == snap.checkpoint
        assert [c.status for c in after.batch_calls()] == [c.status for c in snap.batch_calls()]
    # Nothing was lost: the row mended, the run resumes from where it waited.
    assert await _set_message(where, 1, good) == bad
    async with store_of() as store:
        done = await sr.Runtime(store, agents=[lazy_agent(3, resumed=True)]).resume(RUN)
        assert (done.status, done.text) == ("completed", "done"), done.error
        assert [c.status for c in done.calls].count("succeeded") == 6
