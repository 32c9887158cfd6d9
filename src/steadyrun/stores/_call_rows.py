"""Call rows that keep a call's arguments and result once: in the context log, by reference.

A call's arguments are in the assistant message that asked for it, and its result (or error)
is in the tool message that answered it. A SQL store writes a call row without a text the log
provably holds: when the step that carries the call writes, in the same transaction, a message
part with the same call id and the very same text, the row keeps where that part lies
(``Ref``) instead of the text. Otherwise (a call saved between steps, a result the log holds
offloaded or truncated, a context that was never written) the text stays in the row.

A place in the log is ``(segment, index, part)``: the segment of the log (0 until the first
rewrite, one more after each, see ``steadyrun.stores._history``), the message's index in that
segment and the part's index in the message. A segment's messages never change once written:
while it is current they are in ``context``; a rewrite copies them into ``context_segments``
before it replaces them. So a reference stays good for as long as the run is stored, also
after its context was compacted.

Stored call documents:
    format 1: the whole ``CallRecord`` (every row written before schema version 5).
    format 2: the ``CallRecord`` without its fields at their defaults (a reader fills them
        in; a release that changes a default must write a new format), with the referred
        texts left out (``arguments`` empty, ``result``/``error`` absent), and ``refs``:
        ``[field, segment, index, part, digest]`` for each (absent when there is none).
Readers take both and refuse any other format.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, SchemaValidator, to_json
from pydantic_core import core_schema as cs

from steadyrun._codec import _adapter, decode, from_plain
from steadyrun._errors import FormatVersionError, StoreError
from steadyrun._fast_json import writer
from steadyrun.chat import Message, ToolCallPart, ToolResultPart
from steadyrun.records import CallRecord, merge_call, merges_whole, whole_rev
from steadyrun.records._copy import copied

__all__ = [
    "CALL_ROW_FORMAT",
    "CallRows",
    "HeldRow",
    "NO_SPOTS",
    "CallRow",
    "Place",
    "Ref",
    "Spots",
    "decode_rows",
    "detached",
    "detaching",
    "digest",
    "gone",
    "encode_row",
    "merge_held",
    "needs",
    "resolve",
]

CALL_ROW_FORMAT = 2
"""The format of the call documents this release writes (see the module's docstring)."""

Place = tuple[int, int, int]
"""``(segment, message index in it, part index in the message)``."""

Ref = tuple[str, int, int, int, str]
"""``(field, segment, index, part, digest)``: where the text of ``field`` lies in the log, and
the text's ``digest`` (a row carries a reference over to a newer snapshot whose text has the
same digest without reading the log, and a reader checks what it read against it)."""

_FIELDS = ("arguments", "result", "error")
_HEAD = b'{"format":%d,"data":' % CALL_ROW_FORMAT
_REFS_HEAD = b'{"format":%d,"refs":' % CALL_ROW_FORMAT
_DATA_AFTER_REFS = b',"data":'


def digest(text: str) -> str:
    """128 bits of BLAKE2b of ``text``: equal digests are taken as equal texts."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(slots=True)
class CallRow:
    """A stored call document read back: the record, and where its left-out texts lie.

    ``record`` has the referred fields blank until ``resolve`` fills them in.
    """

    record: CallRecord
    refs: list[Ref] = field(default_factory=list)


@dataclass(slots=True)
class Spots:
    """Places of the log known to hold a text: the candidates a row may refer to.

    Keys are ``("call", provider call id)`` for a tool call's arguments and ``("result",
    provider call id)`` for a tool result's content. ``texts`` are parts written in this
    transaction; ``digests`` are places stored rows referred to.
    """

    texts: dict[tuple[str, str], list[tuple[str, Place]]] = field(default_factory=dict)
    digests: dict[tuple[str, str], list[tuple[str, Place]]] = field(default_factory=dict)

    def add_messages(self, messages: Sequence[Message], segment: int, start: int) -> None:
        """Add the parts of ``messages``, written from index ``start`` of ``segment``."""
        for i, message in enumerate(messages):
            for j, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart):
                    key, text = ("call", part.call_id), part.arguments
                elif isinstance(part, ToolResultPart):
                    key, text = ("result", part.call_id), part.content
                else:
                    continue
                self.texts.setdefault(key, []).append((text, (segment, start + i, j)))

    def carrying(self, row: CallRow) -> Spots:
        """These spots and the places ``row`` referred to."""
        return self.carrying_refs(row.refs, row.record.provider_call_id)

    def carrying_refs(self, refs: list[Ref], provider_call_id: str) -> Spots:
        """These spots and the places ``refs`` (of a row of ``provider_call_id``) referred to."""
        if not refs:
            return self
        out = Spots(self.texts, {k: list(v) for k, v in self.digests.items()})
        for name, seg, idx, part, sum_ in refs:
            key = ("call" if name == "arguments" else "result", provider_call_id)
            out.digests.setdefault(key, []).append((sum_, (seg, idx, part)))
        return out

    def ref_of(self, name: str, call_id: str, text: str) -> Ref | None:
        """A reference to a place holding exactly ``text`` as ``name`` of ``call_id``."""
        key = ("call" if name == "arguments" else "result", call_id)
        sum_ = None
        for held, place in self.texts.get(key, ()):
            if held == text:
                return (name, *place, digest(text))
        for held, place in self.digests.get(key, ()):
            sum_ = sum_ or digest(text)
            if held == sum_:
                return (name, *place, sum_)
        return None


NO_SPOTS = Spots()
"""No place known: every text stays in the row."""

_CALL_ROWS = 10_000  # rows a store remembers (calls not yet settled, in practice)


@dataclass(frozen=True, slots=True)
class HeldRow:
    """A call row this store wrote last, and what a settle over it needs to know of it.

    Attributes:
        raw: The row's bytes (a store updates the row only while it still holds them).
        whole: The written record's ``whole_rev``: its ``rev`` when ``merge_call`` replaces
            it whole with any newer snapshot, else ``None``.
        provider_call_id: The written record's provider call id (its references' key,
            ``Spots.carrying``).
    """

    raw: bytes
    whole: int | None
    provider_call_id: str


class CallRows:
    """The call rows this store wrote last, of calls not settled: what a settle merges with.

    Only a guess: a store updates a row with what it merged against these bytes only while
    the row still holds them (PostgreSQL's ``save_loop_step``, SQLite's ``_sqlite_step``).
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], HeldRow] = {}

    def get(self, run_id: str, call_id: str) -> HeldRow | None:
        """The row last written for the call, if this store wrote one and remembers it."""
        return self._rows.get((run_id, call_id))

    def wrote(self, run_id: str, call: CallRecord, row: bytes) -> None:
        """Remember ``row`` as written for ``call`` (forgotten once the call settles)."""
        key = (run_id, call.id)
        if call.settled:
            self._rows.pop(key, None)
            return
        if len(self._rows) >= _CALL_ROWS and key not in self._rows:
            self._rows.clear()  # a guess only: forgetting costs one general-path write
        self._rows[key] = HeldRow(row, whole_rev(call), call.provider_call_id)

    def forget(self, run_id: str, call_ids: list[str] | tuple[str, ...]) -> None:
        """Forget the rows of these calls (written elsewhere, or removed)."""
        for call_id in call_ids:
            self._rows.pop((run_id, call_id), None)


def merge_held(held: HeldRow, call: CallRecord, spots: Spots) -> tuple[CallRecord, bytes] | str:
    """``call`` merged over ``held``, the row this store wrote last, and the merge's row.

    Or why not, as a word: ``"read"`` when the merge keeps texts the row refers to (the
    stored call is settled or handed over: they must be read), ``"same"`` when ``call`` is
    not newer than the row (an older or equal snapshot changes nothing). Both SQL stores'
    loop steps merge a settle so, each then writing it only while the row still holds
    ``held.raw``.

    A row replaced whole (``HeldRow.whole``: the loop's settle of a call it started) is not
    decoded: ``merge_call`` gives the newer snapshot itself, and of the row only the places
    it refers to are carried over, read from its ``refs`` alone.
    """
    if merges_whole(held.whole, call):
        refs = _refs_in(held.raw)
        if refs:
            spots = spots.carrying_refs(refs, held.provider_call_id)
        # ``call`` itself where ``merge_call`` gives a copy of it: the caller only encodes it.
        return call, encode_row(call, spots)
    (row,) = decode_rows([held.raw])
    stored = row.record
    if row.refs and (stored.settled or stored.handover):
        return "read"
    if call.rev <= stored.rev:
        return "same"
    merged = merge_call(stored, call)
    return merged, encode_row(merged, spots.carrying(row))


def _refs_in(raw: bytes) -> list[Ref]:
    """The ``refs`` of a row ``encode_row`` wrote, without decoding its record."""
    if raw.startswith(_HEAD):
        return []
    if not raw.startswith(_REFS_HEAD):
        raise StoreError("a call row written here does not begin as encode_row writes one")
    start = len(_REFS_HEAD)
    # References hold field names, numbers and hex digests: never this separator.
    return _checked(json.loads(raw[start : raw.index(_DATA_AFTER_REFS, start)]))


# msgspec writes the row where it writes pydantic's bytes (``_fast_json``): 2 times faster
_QUICK = writer(CallRecord, omit_defaults=True)


def encode_row(record: CallRecord, spots: Spots) -> bytes:
    """The stored document of ``record`` (format 2), referring to the texts ``spots`` hold."""
    refs: list[Ref] = []
    blank: dict[str, Any] = {}
    for name, empty in (("arguments", ""), ("result", None), ("error", None)):
        text = getattr(record, name)
        ref = spots.ref_of(name, record.provider_call_id, text) if text else None
        if ref is not None:
            refs.append(ref)
            blank[name] = empty
    kept = copied(record, **blank) if blank else record
    data = _QUICK(kept) if _QUICK is not None else None
    if data is None:
        try:
            data = _adapter(CallRecord).serializer.to_json(kept, exclude_defaults=True)
        except PydanticSerializationError as exc:
            raise StoreError(f"cannot store CallRecord: {exc}") from exc
    if not refs:
        return _HEAD + data + b"}"
    listed = to_json(refs)  # compact, as json.dumps with tight separators, in a tenth of the time
    return _REFS_HEAD + listed + _DATA_AFTER_REFS + data + b"}"


_reader: SchemaValidator | None = None


def _rows_reader() -> SchemaValidator:
    global _reader
    if _reader is None:
        ints = [cs.int_schema()] * 3
        ref = cs.tuple_schema([cs.str_schema(), *ints, cs.str_schema()])
        envelope = cs.typed_dict_schema(
            {
                "format": cs.typed_dict_field(cs.int_schema(strict=True)),
                "refs": cs.typed_dict_field(cs.list_schema(ref), required=False),
                "data": cs.typed_dict_field(_adapter(CallRecord).core_schema),
            }
        )
        _reader = SchemaValidator(cs.list_schema(cs.json_schema(envelope)))
    return _reader


def decode_rows(raws: Iterable[bytes | str]) -> list[CallRow]:
    """Stored call documents of format 1 or 2, parsed once from their bytes, in order.

    Raises:
        FormatVersionError: A document of another format.
        StoreError: A document that is not a call document.
    """
    raws = list(raws)
    try:
        docs = _rows_reader().validate_python(raws)
    except ValidationError:
        return [_decode_slowly(raw) for raw in raws]  # the first refused one says why
    rows: list[CallRow] = []
    for doc in docs:
        refs = doc.get("refs") or []
        if doc["format"] != CALL_ROW_FORMAT and (doc["format"] != 1 or refs):
            raise FormatVersionError("CallRecord", doc["format"], CALL_ROW_FORMAT)
        rows.append(CallRow(doc["data"], _checked(refs)))
    return rows


def _decode_slowly(raw: bytes | str) -> CallRow:
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise StoreError(f"stored CallRecord is not valid JSON: {exc}") from exc
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if type(fmt) is int and fmt == CALL_ROW_FORMAT and "data" in doc:
        refs = from_plain(doc.get("refs") or [], list[tuple[str, int, int, int, str]])
        return CallRow(from_plain(doc["data"], CallRecord), _checked(refs))
    # Format 1, or not a call document at all: the codec says precisely what is wrong.
    return CallRow(decode(raw, CallRecord))


def _checked(refs: list[Any]) -> list[Ref]:
    for ref in refs:
        if ref[0] not in _FIELDS:
            raise StoreError(f"stored CallRecord refers to an unknown field {ref[0]!r}")
    return [tuple(r) for r in refs]


def needs(rows: Iterable[CallRow], current: int) -> tuple[set[int], set[tuple[int, int]]]:
    """The log messages ``rows`` refer to: indexes in the ``current`` segment, older places."""
    now: set[int] = set()
    past: set[tuple[int, int]] = set()
    for row in rows:
        for _, seg, idx, _, _ in row.refs:
            if seg == current:
                now.add(idx)
            else:
                past.add((seg, idx))
    return now, past


def resolve(
    rows: Iterable[CallRow],
    current: int | None,
    message: Callable[[int, int], Message | None],
) -> list[CallRecord]:
    """The records of ``rows`` with each referred text read from the log (filled in).

    Args:
        rows: Decoded call rows.
        current: The run's current segment (its latest step's; ``None``: no step entry).
        message: The message at ``(segment, index)``, ``None`` when the store holds none.

    Raises:
        StoreError: A referred message or part is missing or is not the call's: the store
            lost part of the log.
    """
    out: list[CallRecord] = []
    for row in rows:
        record = row.record
        for name, seg, idx, j, sum_ in row.refs:
            if current is None or seg > current:
                raise StoreError(
                    f"call {record.id!r} refers to segment {seg} of the log, which the "
                    "store does not hold"
                )
            # Filled in place: the record was decoded for this row alone (``replace`` of its
            # 21 fields was half the cost of reading a long run's calls).
            setattr(record, name, _text(record, name, message(seg, idx), (seg, idx, j), sum_))
        out.append(record)
    return out


def gone(old: Iterable[tuple[int, bytes]], at: int, log: Sequence[bytes]) -> set[int]:
    """The indexes of ``old`` messages that writing ``log`` from ``at`` does not write again.

    ``old``: the stored ``(index, message)`` from ``at`` on, which a retried step deletes.
    """
    return {idx for idx, raw in old if not (0 <= idx - at < len(log) and log[idx - at] == raw)}


def detaching(rows: Iterable[CallRow], segment: int, lost: set[int]) -> list[CallRow]:
    """The rows that refer to a message of ``segment`` at an index in ``lost``.

    A retried step deletes the log after its start before it writes its messages again, and a
    later step's row may refer to a message it does not write again: such rows take their
    texts back first (``detached``), so no reference ever points at a message the store no
    longer holds.
    """
    return [row for row in rows if any(s == segment and i in lost for _, s, i, _, _ in row.refs)]


def detached(row: CallRow, segment: int, lost: set[int]) -> bytes:
    """The stored document of ``row`` (resolved), its texts at ``lost`` of ``segment`` kept.

    The texts it referred to at those indexes of ``segment`` are kept in the row; its other
    references stay.
    """
    kept = [ref for ref in row.refs if not (ref[1] == segment and ref[2] in lost)]
    return encode_row(row.record, NO_SPOTS.carrying(CallRow(row.record, kept)))


def _text(record: CallRecord, name: str, msg: Message | None, place: Place, sum_: str) -> str:
    seg, idx, j = place
    part = msg.parts[j] if msg is not None and 0 <= j < len(msg.parts) else None
    text: str | None = None
    if isinstance(part, ToolCallPart | ToolResultPart) and part.call_id == record.provider_call_id:
        if name == "arguments" and isinstance(part, ToolCallPart):
            text = part.arguments
        if name != "arguments" and isinstance(part, ToolResultPart):
            text = part.content
    if text is None or digest(text) != sum_:
        raise StoreError(
            f"the {name} of call {record.id!r} lie in part {j} of message {idx} of segment "
            f"{seg} of the log, which does not hold them: the store lost part of the log"
        )
    return text
