"""Resume reads a run once and decodes each stored document once, straight from its bytes.

The reference below is the reader of format 1 as it was first written (``json.loads`` of the
envelope, then pydantic on the plain data): whatever the stores decode now must give the same
``RunSnapshot`` for every stored run, and refuse the same documents.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pgkit
import steadyrun as sr
from steadyrun import _codec
from steadyrun._codec import FORMAT, decode, decode_all, encode, from_plain
from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from steadyrun.control import Confirm
from steadyrun.records import Block, CallDecision, CallRecord, Checkpoint, RunRecord, RunSnapshot
from steadyrun.stores import PostgresStore, _call_rows
from steadyrun.stores._call_rows import CALL_ROW_FORMAT
from steadyrun.testing import ScriptedModel, text, tool_calls

pg_dsn = pgkit.database_fixture()
RUN = "r"


# -- the reference reader ----------------------------------------------------------------------


def reference(raw: bytes | str, tp: Any) -> Any:
    """Format 1 read in two passes: the envelope with ``json.loads``, the data with pydantic."""
    doc = json.loads(raw)
    if type(doc["format"]) is not int or doc["format"] != FORMAT:
        raise FormatVersionError(tp.__name__, doc["format"], FORMAT)
    return from_plain(doc["data"], tp)


def reference_call(raw: bytes | str, context: list[Message]) -> CallRecord:
    """A call row of format 1, or of format 2 (texts in the log; no rewrite in these runs)."""
    doc = json.loads(raw)
    if doc["format"] != 2:
        return reference(raw, CallRecord)  # type: ignore[no-any-return]
    record = from_plain(doc["data"], CallRecord)
    for name, segment, idx, part, _ in doc.get("refs", []):
        assert segment == 0
        held = context[idx].parts[part]
        setattr(record, name, held.arguments if name == "arguments" else held.content)  # type: ignore[union-attr]
    return record


def reference_snapshot(
    run: bytes, checkpoint: bytes, context: Iterable[bytes], calls: Iterable[bytes], blocks: Any
) -> RunSnapshot:
    log = [reference(m, Message) for m in context]
    return RunSnapshot(
        run=reference(run, RunRecord),
        checkpoint=reference(checkpoint, Checkpoint),
        context=log,
        calls=[reference_call(c, log) for c in calls],
        blocks=[reference(b, Block) for b in blocks],
    )


# -- one document ------------------------------------------------------------------------------

texts = st.text(max_size=20)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
refs = st.builds(MediaRef, key=texts, mime=texts, size=st.integers(min_value=0))
parts = st.one_of(
    st.builds(TextPart, text=texts),
    st.builds(
        ThinkingPart, text=texts, provider_details=st.none() | st.dictionaries(texts, values)
    ),
    st.builds(ToolCallPart, call_id=texts, name=texts, arguments=texts),
    st.builds(ToolResultPart, call_id=texts, name=texts, content=texts, media=st.lists(refs)),
    st.builds(MediaPart, ref=refs),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    parts=st.lists(parts, max_size=4),
    id=st.none() | texts,
    meta=st.none() | st.dictionaries(texts, texts, max_size=2),
)
times = st.datetimes(timezones=st.just(UTC))
calls = st.builds(
    CallRecord,
    id=texts,
    name=texts,
    arguments=texts,
    rev=st.integers(min_value=0),
    status=st.sampled_from(["queued", "running", "succeeded", "needs_review", "waiting"]),
    result=st.none() | texts,
    started_at=st.none() | times,
    payload=values,
    decision=st.none() | st.builds(CallDecision, approve=st.booleans(), decided_at=times),
    notes=st.dictionaries(texts, texts, max_size=2),
)


@given(st.one_of(messages, calls))
def test_a_document_decodes_as_the_two_pass_reader_decodes_it(value: Any) -> None:
    raw = encode(value)
    assert decode(raw, type(value)) == reference(raw, type(value))
    assert decode(raw.decode(), type(value)) == value


@given(st.one_of(messages, calls), values)
def test_a_document_is_read_whatever_its_key_order_and_extra_keys(value: Any, extra: Any) -> None:
    # Written by another JSON writer: the envelope's keys in any order, with unknown ones.
    data = json.loads(encode(value))["data"]
    raw = json.dumps({"extra": extra, "data": data, "format": FORMAT}, indent=1)
    assert decode(raw, type(value)) == value


@given(st.lists(messages, max_size=6))
def test_many_documents_decode_as_the_two_pass_reader_decodes_each(values: list[Message]) -> None:
    raws = [encode(v) for v in values]
    assert decode_all(raws, Message) == [reference(r, Message) for r in raws] == values


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (b'{"format":2,"data":{"role":"user"}}', FormatVersionError),
        (b'{"format":1,"data":{"role":"robot"}}', StoreError),
        (b'{"format":1,"data":', StoreError),
        (b'{"format":1,"data":{"role":"user"}},{"format":1,"data":{"role":"user"}}', StoreError),
    ],
    ids=["unknown-format", "misfit", "cut-short", "two-in-one-row"],
)
@pytest.mark.parametrize("at", [0, 2, 4])
def test_one_refused_document_among_many_fails_as_it_fails_alone(
    bad: bytes, error: type[Exception], at: int
) -> None:
    raws = [encode(Message(role="user", parts=[TextPart(text=str(i))])) for i in range(4)]
    raws.insert(at, bad)
    with pytest.raises(error) as alone:
        decode(bad, Message)
    with pytest.raises(error) as among:
        decode_all(raws, Message)
    assert str(among.value) == str(alone.value)


def test_rows_are_never_read_across_their_borders() -> None:
    # Two damaged rows that would make one valid JSON array if their texts were joined.
    halves = [
        b'{"format":1,"data":{"role":"user","parts":[{"kind":"text","text":"a"}',
        b'{"kind":"text","text":"b"}]}}',
    ]
    with pytest.raises(StoreError):
        decode_all(halves, Message)


unknown_formats = (
    st.integers().filter(lambda n: n != FORMAT)
    | st.sampled_from([True, 1.0, "1", None, [1]])
    | st.floats(allow_nan=False)
)


@given(unknown_formats, messages)
def test_an_unknown_format_is_refused_even_when_its_data_fits(fmt: Any, message: Message) -> None:
    raw = json.dumps({"format": fmt, "data": json.loads(encode(message))["data"]})
    with pytest.raises(FormatVersionError) as info:
        decode(raw, Message)
    assert info.value.found == fmt and info.value.known == FORMAT


def test_a_well_formed_document_is_parsed_once_by_pydantic(monkeypatch: Any) -> None:
    def no_second_pass(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the document went through json.loads")

    monkeypatch.setattr(_codec.json, "loads", no_second_pass)
    message = Message(role="user", parts=[TextPart(text="hi")])
    assert decode(encode(message), Message) == message


# -- stored runs -------------------------------------------------------------------------------


def _agent(n: int, *, resumed: bool = False) -> sr.Agent:
    """An agent of n turns whose last turn waits for approval; thinking and errors on the way."""

    @sr.tool(policy=lambda view: Confirm(prompt="ok?") if view.arguments["k"] == n - 1 else None)
    async def step(k: int) -> str:
        """One step.

        Args:
            k: Which.
        """
        if k % 3 == 2:
            raise ValueError(f"step {k} — ✓ failed")
        return f"step {k} done: 日本 {'x' * k}"

    script = [
        tool_calls(("step", {"k": k}), ("step", {"k": k + 100}), content=f"turn {k}")
        for k in range(n)
    ]
    script[0].message.parts.insert(0, ThinkingPart(text="think", signature="s=="))
    if resumed:  # the model of a restarted process: the run goes on from its last turn
        script = []
    return sr.Agent(
        name="a", model=ScriptedModel([*script, text("done")]), tools=[step], instructions="go"
    )


async def _suspend(store: Any, n: int = 6) -> sr.RunResult:
    result = await sr.Runtime(store).run(_agent(n), run_id=RUN, input="start")
    assert result.status == "suspended"
    return result


def _sqlite_rows(path: Path) -> tuple[Any, ...]:
    with sqlite3.connect(path) as conn:
        run, cp = conn.execute(
            "SELECT record, checkpoint FROM runs WHERE run_id = ?", (RUN,)
        ).fetchone()
        q = "SELECT {} FROM {} WHERE run_id = ? ORDER BY {}"
        ctx = [r[0] for r in conn.execute(q.format("message", "context", "idx"), (RUN,))]
        calls = [r[0] for r in conn.execute(q.format("record", "calls", "rowid"), (RUN,))]
        blocks = [r[0] for r in conn.execute(q.format("block", "blocks", "position"), (RUN,))]
    return run, cp, ctx, calls, blocks


async def test_a_stored_sqlite_run_loads_as_the_reference_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        await _suspend(store)
        snap = await store.load(RUN)
    expected = reference_snapshot(*_sqlite_rows(path))
    assert snap == expected
    assert len(snap.context) > 10 and len(snap.calls) > 10 and snap.blocks


async def test_a_stored_memory_run_loads_as_the_reference_reads_it() -> None:
    store = sr.MemoryStore()
    await _suspend(store)
    kept = store._runs[RUN]
    blocks = sorted(kept.blocks.values(), key=lambda b: reference(b, Block).position)
    expected = reference_snapshot(
        kept.run, kept.checkpoint, kept.context, kept.calls.values(), blocks
    )
    assert await store.load(RUN) == expected


async def test_a_stored_postgres_run_loads_as_the_reference_reads_it(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn) as store:
        await _suspend(store)
        snap = await store.load(RUN)
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        s = "steadyrun"
        cur = await conn.execute(
            f"SELECT record, checkpoint FROM {s}.runs WHERE run_id = %s", (RUN,)
        )
        run, cp = await cur.fetchone()  # type: ignore[misc]
        rows = []
        for sql in (
            f"SELECT message FROM {s}.context WHERE run_id = %s ORDER BY idx",
            f"SELECT record FROM {s}.calls WHERE run_id = %s ORDER BY row_id",
            f"SELECT block FROM {s}.blocks WHERE run_id = %s ORDER BY position",
        ):
            cur = await conn.execute(sql, (RUN,))
            rows.append([r[0] for r in await cur.fetchall()])
    assert snap == reference_snapshot(run, cp, *rows)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_a_stored_run_is_read_without_json_loads(
    kind: str, tmp_path: Path, monkeypatch: Any, request: pytest.FixtureRequest
) -> None:
    # The slow reader gives the same snapshot, so only this shows the one pass is taken.
    if kind == "memory":
        store: Any = sr.MemoryStore()
    elif kind == "sqlite":
        store = sr.SqliteStore(tmp_path / "runs.db")
    else:
        store = PostgresStore(request.getfixturevalue("pg_dsn"))
    try:
        await _suspend(store)
        expected = await store.load(RUN)

        def no_second_pass(*args: Any, **kw: Any) -> Any:
            raise AssertionError("a stored document went through json.loads")

        monkeypatch.setattr(_codec.json, "loads", no_second_pass)
        assert await store.load(RUN) == expected
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("table", "column", "key", "order"),
    [
        ("runs", "record", "run_id", "run_id"),
        ("runs", "checkpoint", "run_id", "run_id"),
        ("context", "message", "idx", "idx DESC"),  # the newest message
        ("context", "message", "idx", "idx"),  # the oldest
        ("calls", "record", "call_id", "rowid"),
        ("blocks", "block", "block_id", "position DESC"),
    ],
)
@pytest.mark.parametrize("fmt", [FORMAT + 1, True, 1.0])
async def test_a_stored_document_of_an_unknown_format_is_refused(
    tmp_path: Path, table: str, column: str, key: str, order: str, fmt: Any
) -> None:
    if table == "calls" and fmt == FORMAT + 1:
        fmt = CALL_ROW_FORMAT + 1  # call rows have a format of their own (2: texts by reference)
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        await _suspend(store)
    with sqlite3.connect(path) as conn:
        at, raw = conn.execute(
            f"SELECT {key}, {column} FROM {table} WHERE run_id = ? ORDER BY {order} LIMIT 1",
            (RUN,),
        ).fetchone()
        doc = json.loads(raw)
        doc["format"] = fmt  # the data still fits: only the version says no
        changed = json.dumps(doc).encode()
        conn.execute(
            f"UPDATE {table} SET {column} = ? WHERE run_id = ? AND {key} = ?", (changed, RUN, at)
        )
    async with sr.SqliteStore(path) as store:
        with pytest.raises(FormatVersionError) as info:
            await store.load(RUN)
    assert info.value.found == fmt


async def test_a_stored_document_that_does_not_fit_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    async with sr.SqliteStore(path) as store:
        await _suspend(store)
    with sqlite3.connect(path) as conn:
        bad = json.dumps({"format": FORMAT, "data": {"role": "robot"}}).encode()
        conn.execute("UPDATE context SET message = ? WHERE run_id = ? AND idx = 3", (bad, RUN))
    async with sr.SqliteStore(path) as store:
        with pytest.raises(StoreError, match="does not match Message") as info:
            await store.load(RUN)
    assert not isinstance(info.value, FormatVersionError)


# -- loads per resume --------------------------------------------------------------------------


class CountingStore(sr.MemoryStore):
    """A ``MemoryStore`` that counts ``load`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, run_id: str) -> RunSnapshot | None:
        self.loads += 1
        return await super().load(run_id)


async def _approved(store: CountingStore) -> None:
    result = await _suspend(store, n=2)
    waiting = [c for c in result.calls if c.status == "awaiting_decision"]
    await sr.Runtime(store).decide(RUN, waiting[0].id, approve=True)
    store.loads = 0


async def test_resume_loads_the_run_once() -> None:
    store = CountingStore()
    await _approved(store)
    result = await sr.Runtime(store, agents=[_agent(2, resumed=True)]).resume(RUN)
    assert result.status == "completed"
    assert store.loads == 1


@pytest.mark.parametrize("given_input", [None, "start", "more, please"])
async def test_run_of_a_stored_run_loads_it_once(given_input: str | None) -> None:
    # None: a plain resume; "start": the retried first input; anything else: new input sent.
    store = CountingStore()
    await _approved(store)
    runtime = sr.Runtime(store)
    result = await runtime.run(_agent(2, resumed=True), run_id=RUN, input=given_input)
    assert result.status == "completed"
    assert store.loads == 1


async def test_resume_of_a_completed_run_loads_it_once() -> None:
    store = CountingStore()
    await _approved(store)
    runtime = sr.Runtime(store, agents=[_agent(2, resumed=True)])
    await runtime.resume(RUN)
    store.loads = 0
    assert (await runtime.resume(RUN)).status == "completed"
    assert store.loads == 1


def test_the_reference_is_the_reader_of_format_1() -> None:
    # The reference must itself read what today's writer writes (else the tests prove nothing).
    run = RunRecord(run_id="x", agent="a", created_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert reference(encode(run), RunRecord) == run


# -- what a resume decodes before its first model call ------------------------------------------


class Decoded:
    """Stored documents decoded, by type name, counted where the codec reads them."""

    def __init__(self, monkeypatch: Any) -> None:
        self.by_type: dict[str, int] = {}
        self.at_model: dict[str, int] | None = None
        reader = _codec._reader

        def counted_reader(tp: Any) -> Any:
            inner = reader(tp)
            counts = self.by_type
            name = getattr(tp, "__name__", str(tp))

            class Counted:
                def validate_python(self, raws: list[Any]) -> Any:
                    counts[name] = counts.get(name, 0) + len(raws)
                    return inner.validate_python(raws)

            return Counted()

        monkeypatch.setattr(_codec, "_reader", counted_reader)
        rows_reader = _call_rows._rows_reader

        def counted_rows_reader() -> Any:
            inner = rows_reader()
            counts = self.by_type

            class Counted:
                def validate_python(self, raws: list[Any]) -> Any:
                    # A SQL store's call rows: counted as the records they are.
                    counts["CallRecord"] = counts.get("CallRecord", 0) + len(raws)
                    return inner.validate_python(raws)

            return Counted()

        monkeypatch.setattr(_call_rows, "_rows_reader", counted_rows_reader)

    def model(self, request: sr.chat.ModelRequest) -> sr.chat.ModelResponse:
        if self.at_model is None:
            self.at_model = dict(self.by_type)
        return text("done")


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_a_resume_decodes_the_context_and_its_open_batch_before_the_model_call(
    kind: str, tmp_path: Path, monkeypatch: Any, request: pytest.FixtureRequest
) -> None:
    # Past blocks (and, in memory, past calls) are read when asked for, not to resume: what is
    # decoded stays at the open batch's however long the run. The context is decoded once, to
    # hand it to the model.
    if kind == "memory":
        store: Any = sr.MemoryStore()
    elif kind == "sqlite":
        store = sr.SqliteStore(tmp_path / "runs.db")
    else:
        store = PostgresStore(request.getfixturevalue("pg_dsn"))
    try:
        result = await _suspend(store, n=8)
        waiting = [c for c in result.calls if c.status == "awaiting_decision"]
        await sr.Runtime(store).decide(RUN, waiting[0].id, approve=True)
        snap = await store.load(RUN)
        assert snap is not None and len(snap.calls) > 10 and len(snap.blocks) > 10
        batch, context = len(snap.checkpoint.batch), len(snap.context)
        decoded = Decoded(monkeypatch)
        agent = sr.Agent(
            name="a", model=sr.testing.FunctionModel(decoded.model), tools=[], instructions="go"
        )
        done = await sr.Runtime(store, agents=[agent]).resume(RUN)
        assert done.status == "completed", done.error
        assert decoded.at_model is not None
        assert decoded.at_model.get("Message", 0) == context
        # Each call of the open batch: read by the run, and once more by the store merging its
        # outcome; none of the calls before it (the SQL stores resolve a call row against the
        # log as the run reads it).
        assert decoded.at_model.get("CallRecord", 0) <= 2 * batch
        assert decoded.at_model.get("Block", 0) == 0
        assert done.calls == [*snap.calls[:-batch], *done.calls[-batch:]]
    finally:
        await store.close()


async def test_a_run_nobody_follows_copies_no_request_for_the_live_feed(
    monkeypatch: Any,
) -> None:
    # Each observer gets a copy of what it is told; the live feed's observer is told nothing
    # while nobody follows, so nothing is copied (a copy of the request is the whole context).
    from steadyrun.runtime import _observers

    copies = []
    deepcopy = _observers.copy.deepcopy

    def counted(value: Any, *args: Any) -> Any:
        copies.append(value)
        return deepcopy(value, *args)

    monkeypatch.setattr(_observers.copy, "deepcopy", counted)
    store = sr.MemoryStore()
    result = await sr.Runtime(store).run(_agent(3), run_id=RUN, input="start")
    assert result.status == "suspended"
    assert copies == []
