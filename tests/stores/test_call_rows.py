"""Call rows keep a text once: a reference when the log holds it, the text itself otherwise."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgkit
import steadyrun as sr
from steadyrun._codec import decode, encode
from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import Message, TextPart, ToolCallPart, ToolResultPart
from steadyrun.context import ContextPolicy
from steadyrun.records import CallRecord, Checkpoint, ContextChange, RunRecord, Step
from steadyrun.records._stored import StoredSnapshot
from steadyrun.stores import PostgresStore
from steadyrun.stores._call_rows import (
    NO_SPOTS,
    CallRow,
    CallRows,
    HeldRow,
    Spots,
    decode_rows,
    detached,
    detaching,
    digest,
    encode_row,
    gone,
    merge_held,
    resolve,
)
from steadyrun.stores._call_rows_sql import MESSAGE_NOW, MESSAGE_PAST, lookups
from steadyrun.testing import FunctionModel, call, text, tool_calls

texts = st.text(max_size=30)
maybe = st.none() | texts
ids = st.sampled_from(["p1", "p2", ""])


@st.composite
def records(draw: st.DrawFn) -> CallRecord:
    return CallRecord(
        id=draw(st.sampled_from(["a.c1", "a.c2"])),
        provider_call_id=draw(ids),
        name="tool",
        arguments=draw(texts),
        rev=draw(st.integers(0, 5)),
        status=draw(st.sampled_from(["queued", "running", "succeeded", "failed", "mine"])),
        result=draw(maybe),
        error=draw(maybe),
        notes=draw(st.dictionaries(texts, texts, max_size=2)),
        payload=draw(st.none() | st.integers() | st.booleans()),
    )


@st.composite
def logs(draw: st.DrawFn) -> list[Message]:
    """Messages with tool calls and results whose ids and texts may or may not match."""
    out: list[Message] = []
    for _ in range(draw(st.integers(0, 4))):
        parts: list[TextPart | ToolCallPart | ToolResultPart] = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["text", "call", "result"]))
            if kind == "text":
                parts.append(TextPart(text=draw(texts)))
            elif kind == "call":
                parts.append(ToolCallPart(call_id=draw(ids), name="tool", arguments=draw(texts)))
            else:
                parts.append(ToolResultPart(call_id=draw(ids), name="tool", content=draw(texts)))
        out.append(Message(role="assistant", parts=parts))  # type: ignore[arg-type]
    return out


@given(records(), logs(), st.integers(0, 3), st.integers(0, 5))
def test_a_row_reads_back_as_the_record_from_the_log_it_refers_to(
    record: CallRecord, log: list[Message], segment: int, start: int
) -> None:
    spots = Spots()
    spots.add_messages(log, segment, start)
    (row,) = decode_rows([encode_row(record, spots)])
    held = {(segment, start + i): m for i, m in enumerate(log)}
    for name, *_ in row.refs:
        assert not getattr(row.record, name)  # a referred text is not in the row too
    # (``resolve`` fills the texts into the rows' records, which are decoded for it alone.)
    assert resolve([row], segment, lambda s, i: held.get((s, i))) == [record]
    # A text the log holds for the call is never kept twice.
    calls = {(p.call_id, p.arguments) for m in log for p in m.parts if isinstance(p, ToolCallPart)}
    if record.arguments and (record.provider_call_id, record.arguments) in calls:
        assert any(r[0] == "arguments" for r in row.refs)


@given(records(), logs())
def test_references_carry_over_by_digest_and_a_changed_text_stays_in_the_row(
    record: CallRecord, log: list[Message]
) -> None:
    spots = Spots()
    spots.add_messages(log, 0, 0)
    (row,) = decode_rows([encode_row(record, spots)])
    (again,) = decode_rows([encode_row(record, NO_SPOTS.carrying(row))])
    assert again.refs == row.refs  # the same texts: the same places, without the log
    changed = CallRecord(
        id=record.id,
        provider_call_id=record.provider_call_id,
        name="tool",
        arguments=record.arguments + "!",
    )
    (other,) = decode_rows([encode_row(changed, NO_SPOTS.carrying(row))])
    assert other.refs == [] and other.record == changed


@given(records())
def test_a_row_without_references_is_the_record(record: CallRecord) -> None:
    assert decode_rows([encode_row(record, NO_SPOTS)]) == decode_rows([encode(record)])
    assert decode_rows([encode(record)])[0].record == decode(encode(record), CallRecord)


@st.composite
def settles(draw: st.DrawFn) -> tuple[CallRecord, CallRecord, list[Message]]:
    """A call row as the loop writes it at the call's start, a later snapshot, and the log."""
    started_with = draw(logs())
    stored = replace(
        draw(records()),
        status=draw(st.sampled_from(["queued", "running", "succeeded"])),
        handover=draw(st.sampled_from(["", "", "await"])),
        settled_by=draw(st.sampled_from([None, None, "host"])),
    )
    incoming = replace(
        draw(records()),
        id=stored.id,
        rev=stored.rev + draw(st.sampled_from([0, 1, 1, 2])),
        settled_by=draw(st.sampled_from([None, None, "host"])),
    )
    if draw(st.booleans()):  # the arguments as the model asked for them: in the log
        pid = stored.provider_call_id
        incoming = replace(incoming, provider_call_id=pid, arguments=stored.arguments)
        asking = ToolCallPart(call_id=pid, name="tool", arguments=stored.arguments)
        started_with = [*started_with, Message(role="assistant", parts=[asking])]
    return stored, incoming, started_with


@given(settles(), logs())
@settings(max_examples=300)
def test_a_settle_over_a_row_it_replaces_whole_writes_what_the_row_read_back_gives(
    settle: tuple[CallRecord, CallRecord, list[Message]], settled_with: list[Message]
) -> None:
    # The loop's settle of a call it started takes the snapshot itself (``HeldRow.whole``)
    # and reads only the row's references: it writes what merging with the decoded row does.
    stored, incoming, started_with = settle
    spots = Spots()
    spots.add_messages(started_with, 0, 0)
    raw = encode_row(stored, spots)
    rows = CallRows()
    rows.wrote("r", stored, raw)
    held = rows.get("r", stored.id)
    if stored.settled:
        assert held is None  # a settled call's row is not merged over from memory
        return
    assert held is not None and held.raw == raw
    later = Spots()
    later.add_messages(settled_with, 0, len(started_with))
    quick = merge_held(held, incoming, later)
    slow = merge_held(HeldRow(raw, None, held.provider_call_id), incoming, later)
    if isinstance(slow, str) or isinstance(quick, str):
        assert quick == slow
    else:
        assert quick[1] == slow[1]
        assert encode(quick[0]) == encode(slow[0])


def test_a_reference_to_a_changed_or_missing_part_is_refused() -> None:
    record = CallRecord(id="a.c1", provider_call_id="p", name="t", arguments='{"x": 1}')
    log = [
        Message(role="assistant", parts=[ToolCallPart(call_id="p", name="t", arguments='{"x": 1}')])
    ]
    spots = Spots()
    spots.add_messages(log, 2, 7)
    (row,) = decode_rows([encode_row(record, spots)])
    assert row.refs == [("arguments", 2, 7, 0, digest('{"x": 1}'))]
    edited = [
        Message(role="assistant", parts=[ToolCallPart(call_id="p", name="t", arguments="{}")])
    ]
    for held, current in (
        ({(2, 7): edited[0]}, 2),  # other text at that place
        ({}, 2),  # no such message
        ({(2, 7): log[0]}, 1),  # a segment the store does not have
        ({(2, 7): log[0]}, None),  # no step entry at all
    ):
        with pytest.raises(StoreError, match="log"):
            resolve([row], current, lambda s, i, held=held: held.get((s, i)))  # type: ignore[misc]


def test_unknown_row_formats_are_refused() -> None:
    record = CallRecord(id="a", name="t")
    for fmt in (0, 3, True):
        raw = encode_row(record, NO_SPOTS).replace(
            b'"format":2', b'"format":%s' % str(fmt).lower().encode()
        )
        with pytest.raises(FormatVersionError):
            decode_rows([raw])
    with pytest.raises(StoreError):
        decode_rows([b'{"format":2,"refs":[["name",0,0,0,"x"]],"data":{"id":"a","name":"t"}}'])


# -- in a store --------------------------------------------------------------------------------


def _rewriting(rounds: int) -> sr.Agent:
    count = 0

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        nonlocal count
        count += 1
        if count > rounds:
            return text("finished")
        return tool_calls(call("step", {"n": count}, id=f"c{count}"))

    @sr.tool(concurrency_key="")
    def step(n: int) -> str:
        """One step with a 1 KB result."""
        return f"step {n} " + "y" * 1000

    return sr.Agent(
        name="rewrite",
        model=FunctionModel(respond),
        tools=[step],
        context=ContextPolicy(window=3_000, keep_rounds=2, clear_share=0.5, summary_tokens=200),
        limits=sr.Limits(max_iterations=100),
    )


async def test_results_cleared_from_the_context_read_back_from_the_replaced_segment(
    tmp_path: Path,
) -> None:
    memory = sr.MemoryStore()
    await sr.Runtime(memory).run(_rewriting(8), run_id="r", input="go")
    db = tmp_path / "runs.db"
    async with sr.SqliteStore(db) as store:
        result = await sr.Runtime(store).run(_rewriting(8), run_id="r", input="go")
        assert result.status == "completed"
        snap = await store.load("r")
        assert snap is not None
        assert [await store.load_call("r", c.id) for c in snap.calls] == snap.calls
    expected = await memory.load("r")
    assert expected is not None
    untimed = [replace(c, started_at=None, completed_at=None) for c in snap.calls]
    assert untimed == [replace(c, started_at=None, completed_at=None) for c in expected.calls]
    cleared = [
        p
        for m in snap.context
        for p in m.parts
        if isinstance(p, ToolResultPart) and "cleared" in p.content
    ]
    assert cleared, "the policy never cleared a result"
    with sqlite3.connect(db) as conn:
        rows = [r[0] for r in conn.execute("SELECT record FROM calls WHERE run_id = 'r'")]
        archived = conn.execute("SELECT COUNT(*) FROM context_segments").fetchone()[0]
    assert archived
    for raw in rows:  # every settled call's texts are in the log: none is kept twice
        assert b'"arguments",' in raw and b'"result",' in raw and b"y" * 100 not in raw


async def test_a_loaded_call_row_is_resolved_when_read_and_its_digest_checked(
    tmp_path: Path,
) -> None:
    agent = _rewriting(2)
    agent.context = None  # never rewritten: every text in segment 0
    db = tmp_path / "runs.db"
    async with sr.SqliteStore(db) as store:
        await sr.Runtime(store).run(agent, run_id="r", input="go")
        expected = await store.load("r")
    assert expected is not None and len(expected.calls) == 2
    with sqlite3.connect(db) as conn:  # the log's copy of the first call's result, edited
        (idx, raw), *_ = [
            (i, m)
            for i, m in conn.execute("SELECT idx, message FROM context WHERE run_id = 'r'")
            if b"step 1 y" in m
        ]
        conn.execute(
            "UPDATE context SET message = ? WHERE run_id = 'r' AND idx = ?",
            (raw.replace(b"step 1 y", b"step 1 z"), idx),
        )
    async with sr.SqliteStore(db) as store:
        snap = await store.load("r")  # the rows are kept stored: nothing read from them yet
        assert snap is not None and isinstance(snap, StoredSnapshot)
        table = snap.call_table()
        assert table[expected.calls[1].id] == expected.calls[1]
        with pytest.raises(StoreError, match="lost part of the log"):
            table[expected.calls[0].id]
        with pytest.raises(StoreError, match="lost part of the log"):
            snap.calls  # noqa: B018


# -- PostgreSQL --------------------------------------------------------------------------------

pg_dsn = pgkit.database_fixture(prefix="steadyrun_callrows")


async def test_postgres_rows_refer_to_the_log_and_read_back_after_rewrites(pg_dsn: str) -> None:
    memory = sr.MemoryStore()
    await sr.Runtime(memory).run(_rewriting(8), run_id="r", input="go")
    async with PostgresStore(pg_dsn) as store:
        result = await sr.Runtime(store).run(_rewriting(8), run_id="r", input="go")
        assert result.status == "completed"
        snap = await store.load("r")
        assert snap is not None
        assert [await store.load_call("r", c.id) for c in snap.calls] == snap.calls
        dump = await store.dump_run("r")
        assert dump is not None and dump.runs[0].calls == snap.calls
    expected = await memory.load("r")
    assert expected is not None
    untimed = [replace(c, started_at=None, completed_at=None) for c in snap.calls]
    assert untimed == [replace(c, started_at=None, completed_at=None) for c in expected.calls]
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT record FROM steadyrun.calls WHERE run_id = 'r'")
        rows = [bytes(r[0]) for r in await cur.fetchall()]
    assert rows
    for raw in rows:  # the first step after a start knows no segment; the others keep none twice
        assert b'"result",' in raw and b"y" * 100 not in raw
    assert sum(b'"arguments",' in raw for raw in rows) >= len(rows) - 1


def _step(n: int, at: int, calls: list[CallRecord], messages: list[Message]) -> Step:
    run = RunRecord(run_id="h", agent="a", steps=n)
    checkpoint = Checkpoint(context_length=at + len(messages))
    return Step(
        run=run,
        checkpoint=checkpoint,
        context=ContextChange(append=messages, start=at),
        calls=calls,
    )


async def test_postgres_a_wrong_segment_hint_is_corrected_in_the_same_step(pg_dsn: str) -> None:
    def asking(i: int) -> tuple[CallRecord, Message]:
        args = f'{{"i": {i}}}'
        record = CallRecord(
            id=f"m{i}.c1",
            provider_call_id=f"p{i}",
            name="t",
            arguments=args,
            rev=1,
            status="running",
        )
        part = ToolCallPart(call_id=f"p{i}", name="t", arguments=args)
        return record, Message(role="assistant", parts=[part])

    async with PostgresStore(pg_dsn) as store:
        first, said = asking(1)
        await store.save_step("h", _step(1, 0, [first], [said]))
        assert store._segments["h"] == 0
        store._segments["h"] = 3  # as if another process had rewritten the context since
        second, said = asking(2)
        await store.save_step("h", _step(2, 1, [second], [said]))
        assert store._segments["h"] == 0
        snap = await store.load("h")
        assert snap is not None and snap.calls == [first, second]
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute(
            "SELECT record FROM steadyrun.calls WHERE run_id = 'h' AND call_id = 'm2.c1'"
        )
        row = await cur.fetchone()
    assert row is not None and b'"refs":[["arguments",0,1,0,' in bytes(row[0])


@given(
    st.lists(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), max_size=4), max_size=3),
    st.integers(0, 2),
    st.none() | st.integers(0, 6),
)
def test_lookups_takes_each_referred_text_once_from_the_log_or_a_statement(
    refs: list[list[tuple[int, int]]], current: int, loaded: int | None
) -> None:
    record = CallRecord(id="a.c1", provider_call_id="p", name="t", arguments="", rev=1)
    rows = [CallRow(record, [("arguments", s, i, 0, "d") for s, i in r]) for r in refs]
    context = None if loaded is None else [Message.user(f"m{i}") for i in range(loaded)]
    messages, todo = lookups("r", rows, current, context)
    wanted = {(s, i) for r in refs for s, i in r}
    places = [place for place, _, _ in todo]
    assert len(places) == len(set(places)) and set(places) | set(messages) == wanted
    assert not set(places) & set(messages)
    for (seg, idx), message in messages.items():  # only the current segment is loaded
        assert seg == current and context is not None and message is context[idx]
    for (seg, idx), statement, params in todo:
        if seg == current:
            assert statement == MESSAGE_NOW and params == ("r", idx)
        else:
            assert statement == MESSAGE_PAST and params == ("r", seg, idx)


@given(
    old=st.lists(st.binary(max_size=3), max_size=8),
    at=st.integers(0, 8),
    log=st.lists(st.binary(max_size=3), max_size=8),
)
def test_a_retried_step_loses_exactly_the_messages_it_does_not_write_again(
    old: list[bytes], at: int, log: list[bytes]
) -> None:
    stored = list(enumerate(old))[at:]
    lost = gone(stored, at, log)
    for idx, raw in stored:
        again = idx - at < len(log) and log[idx - at] == raw
        assert (idx in lost) is not again


def test_a_row_referring_to_a_lost_message_takes_its_text_back_and_keeps_its_other_refs() -> None:
    record = CallRecord(
        id="m2.c1", name="charge", provider_call_id="p1", arguments="{}", result="ok", rev=2
    )
    spots = Spots()
    spots.texts[("call", "p1")] = [("{}", (0, 3, 0))]
    spots.texts[("result", "p1")] = [("ok", (0, 4, 0))]
    (row,) = decode_rows([encode_row(record, spots)])
    assert detaching([row], 0, {4}) == [row]
    assert detaching([row], 0, {5}) == detaching([row], 1, {4}) == []
    row.record.arguments, row.record.result = "{}", "ok"  # resolved
    (again,) = decode_rows([detached(row, 0, {4})])
    assert [ref[:3] for ref in again.refs] == [("arguments", 0, 3)]
    assert again.record.result == "ok"
