"""A run as a store loaded it, its history decoded when first read: ``StoredSnapshot``.

A long run holds thousands of stored documents (N=400 iterations: 1,600), and a resume needs few
of them: the context, to hand it to the model, and the calls of the open batch. Decoding the
rest into records was most of a load (N=400: 7 of 10 ms). A ``StoredSnapshot`` keeps the
context, calls and blocks as their stored bytes and decodes each kind when it is first read
(the whole kind in one call into the codec); ``RunState`` takes the calls by id, decoding one
only when the run reads it. A SQL store's call rows refer to texts of the context log: it hands
over a reader that resolves them against the context as the snapshot loaded it
(``loaded_message``: one message decoded alone while the context is not), so an approval
screen reading the open batch decodes the few messages its calls refer to, not the context.

The stores check each document's envelope when they load it (``framed``): a document of
another format is refused by the load, as before; data that does not fit its type is refused
when it is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any

from steadyrun._codec import decode, decode_all
from steadyrun.chat import Message
from steadyrun.records._call import CallRecord
from steadyrun.records._step import Block, Checkpoint, RunRecord, RunSnapshot

__all__ = ["CallReader", "CallTable", "StoredSnapshot"]

CallReader = Callable[[list[bytes]], list[CallRecord]]
"""Stored call documents into records, in order (a store's own row format, when it has one)."""

# The slots of ``RunSnapshot``, which the properties below fill.
_CONTEXT: Any = RunSnapshot.__dict__["context"]
_CALLS: Any = RunSnapshot.__dict__["calls"]
_BLOCKS: Any = RunSnapshot.__dict__["blocks"]


def _position(block: Block) -> int:
    return block.position


def _decode_calls(raws: list[bytes]) -> list[CallRecord]:
    return decode_all(raws, CallRecord)


class StoredSnapshot(RunSnapshot):
    """A ``RunSnapshot`` whose context, calls and blocks are decoded when first read.

    It is equal to the ``RunSnapshot`` of the same values, and reads, copies and serialises as
    one. Build it with ``StoredSnapshot.of`` (stored bytes) or as a ``RunSnapshot``.
    """

    __slots__ = (
        "_blocks_by_position",
        "_call_reader",
        "_loaded",
        "_raw_blocks",
        "_raw_calls",
        "_raw_context",
        "_singles",
    )

    _raw_context: list[bytes] | None
    _loaded: tuple[Message, ...] | None
    _singles: dict[int, Message]
    _raw_calls: list[tuple[str, bytes]] | None
    _raw_blocks: list[bytes] | None
    _blocks_by_position: bool
    _call_reader: CallReader

    @classmethod
    def of(
        cls,
        run: RunRecord,
        checkpoint: Checkpoint,
        context: list[bytes],
        calls: list[tuple[str, bytes]],
        blocks: list[bytes],
        *,
        sort_blocks: bool = False,
    ) -> StoredSnapshot:
        """The snapshot of these stored documents (calls as ``(id, document)``), in order.

        ``sort_blocks``: the blocks are not in position order yet (sorted once decoded).
        """
        snap = cls.__new__(cls)
        snap.run, snap.checkpoint = run, checkpoint
        snap._raw_context, snap._raw_calls, snap._raw_blocks = context, calls, blocks
        snap._blocks_by_position = sort_blocks
        snap._call_reader = _decode_calls
        snap._loaded, snap._singles = None, {}
        return snap

    def keep_calls(self, calls: list[tuple[str, bytes]], reader: CallReader) -> None:
        """Hold ``calls`` (``(id, document)``, in order) stored, read by ``reader`` when read.

        A store whose call rows are not plain documents (texts referred to in the log) hands
        its reader here, so that only the calls the run reads are resolved.
        """
        self._raw_calls, self._call_reader = calls, reader
        with contextlib.suppress(AttributeError):  # decoded before: read them again
            _CALLS.__delete__(self)

    @property
    def context(self) -> list[Message]:
        """The full model context (decoded when first read)."""
        try:
            value: list[Message] = _CONTEXT.__get__(self)
        except AttributeError:
            value = decode_all(self._raw_context or [], Message)
            _CONTEXT.__set__(self, value)
            # As loaded, for call rows read later: the run changes its context in place.
            self._loaded, self._raw_context, self._singles = tuple(value), None, {}
        return value

    @context.setter
    def context(self, value: list[Message]) -> None:
        _CONTEXT.__set__(self, value)

    def loaded_message(self, index: int) -> Message | None:
        """The context's message ``index`` as loaded (``None``: there is none).

        What the run did to ``context`` since does not change it; while the context is not
        decoded, the message is decoded alone.

        Raises:
            StoreError: The stored message does not fit ``Message``.
        """
        try:
            loaded = self._loaded
        except AttributeError:  # built as a plain ``RunSnapshot``: its context is as given
            loaded = self._loaded = tuple(self.context)
        if loaded is not None:
            return loaded[index] if 0 <= index < len(loaded) else None
        raws = self._raw_context or []  # held until the context is decoded (``of``)
        if not 0 <= index < len(raws):
            return None
        found = self._singles.get(index)
        if found is None:
            found = self._singles[index] = decode(raws[index], Message)
        return found

    @property
    def calls(self) -> list[CallRecord]:
        """Every call record, in id order of creation (decoded when first read)."""
        try:
            value: list[CallRecord] = _CALLS.__get__(self)
        except AttributeError:
            value = self._call_reader([raw for _, raw in self._raw_calls or []])
            _CALLS.__set__(self, value)
            self._raw_calls = None
        return value

    @calls.setter
    def calls(self, value: list[CallRecord]) -> None:
        _CALLS.__set__(self, value)

    @property
    def blocks(self) -> list[Block]:
        """Every block, by position (decoded when first read)."""
        try:
            value: list[Block] = _BLOCKS.__get__(self)
        except AttributeError:
            value = decode_all(self._raw_blocks or [], Block)
            if self._blocks_by_position:
                value.sort(key=_position)
            _BLOCKS.__set__(self, value)
            self._raw_blocks = None
        return value

    @blocks.setter
    def blocks(self, value: list[Block]) -> None:
        _BLOCKS.__set__(self, value)

    def batch_calls(self) -> list[CallRecord]:
        """The calls of the open batch, in call order; only these are decoded.

        A run of N=400 iterations holds 400 call rows; finding the one that waits for a
        decision through ``calls`` decoded (and resolved) them all, 1.5 ms of a resume.
        """
        try:
            decoded: list[CallRecord] = _CALLS.__get__(self)
        except AttributeError:
            # Not a table of every call (a dict of all rows): only the batch's rows are picked.
            wanted = set(self.checkpoint.batch)
            raws = {i: raw for i, raw in self._raw_calls or () if i in wanted}
            ids = [i for i in self.checkpoint.batch if i in raws]
            return self._call_reader([raws[i] for i in ids]) if ids else []
        by_id = {c.id: c for c in decoded}
        return [by_id[i] for i in self.checkpoint.batch if i in by_id]

    def call_table(self) -> CallTable:
        """The calls by id, each decoded when the run first reads it (a new table each time)."""
        try:
            decoded: list[CallRecord] = _CALLS.__get__(self)
        except AttributeError:
            return CallTable(dict(self._raw_calls or []), self._call_reader)
        return CallTable({c.id: c for c in decoded})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunSnapshot):
            return NotImplemented
        return (self.run, self.checkpoint, self.context, self.calls, self.blocks) == (
            other.run,
            other.checkpoint,
            other.context,
            other.calls,
            other.blocks,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"RunSnapshot(run={self.run!r}, checkpoint={self.checkpoint!r}, "
            f"context={self.context!r}, calls={self.calls!r}, blocks={self.blocks!r})"
        )


class CallTable(MutableMapping[str, CallRecord]):
    """A run's call records by id, in order of creation; stored ones decoded when read.

    Reading one record decodes it alone; reading them all (``values``, ``items``) decodes the
    ones left in one call into the codec.
    """

    def __init__(
        self, items: dict[str, CallRecord | bytes] | None = None, reader: CallReader | None = None
    ) -> None:
        self._items: dict[str, CallRecord | bytes] = items if items is not None else {}
        self._reader = reader or _decode_calls
        self._raw = sum(1 for v in self._items.values() if not isinstance(v, CallRecord))

    def __getitem__(self, call_id: str) -> CallRecord:
        value = self._items[call_id]
        if isinstance(value, CallRecord):
            return value
        (record,) = self._reader([value])
        self._items[call_id] = record
        self._raw -= 1
        return record

    def __setitem__(self, call_id: str, record: CallRecord) -> None:
        old = self._items.get(call_id)
        if old is not None and not isinstance(old, CallRecord):
            self._raw -= 1
        self._items[call_id] = record

    def __delitem__(self, call_id: str) -> None:
        old = self._items.pop(call_id)
        if not isinstance(old, CallRecord):
            self._raw -= 1

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._items

    def decoded(self) -> dict[str, CallRecord]:
        """Every record by id, the stored ones decoded now (together)."""
        if self._raw:
            ids = [k for k, v in self._items.items() if not isinstance(v, CallRecord)]
            raws: list[Any] = [self._items[k] for k in ids]
            for k, record in zip(ids, self._reader(raws), strict=True):
                self._items[k] = record
            self._raw = 0
        return self._items  # type: ignore[return-value]

    def values(self) -> ValuesView[CallRecord]:
        """The records, in order of creation."""
        return self.decoded().values()

    def items(self) -> ItemsView[str, CallRecord]:
        """``(id, record)`` pairs, in order of creation."""
        return self.decoded().items()
