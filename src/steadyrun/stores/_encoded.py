"""The storage boundary of every store: a step encoded, a stored run decoded, a dump as rows.

What a store writes and reads back is the same everywhere; only where it keeps the documents
differs. ``encode_step`` and ``decode_snapshot`` are the two directions for every store;
``dump_rows`` gives the SQL stores the rows a restored run tree inserts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from steadyrun._codec import decode, decode_all, encode, framed
from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import Message
from steadyrun.records import (
    CHECKPOINT_FORMAT,
    Block,
    CallRecord,
    Checkpoint,
    RunRecord,
    RunSnapshot,
    Step,
)
from steadyrun.records._stored import StoredSnapshot
from steadyrun.stores._lifecycle import RunDump
from steadyrun.stores._sql_values import to_us

__all__ = [
    "DumpRows",
    "EncodedStep",
    "decode_snapshot",
    "dump_rows",
    "encode_step",
    "run_row",
]


@dataclass(slots=True)
class EncodedStep:
    """The documents of one step, encoded before a store changes anything.

    Attributes:
        run: The run row.
        checkpoint: The checkpoint.
        base: A new base of the context log, when the context was rewritten.
        append: Messages appended to the log.
        blocks: ``(block id, position, document)`` of new or changed blocks.
        size: Bytes of all of the above (call snapshots are counted as they are merged).
    """

    run: bytes
    checkpoint: bytes
    base: list[bytes] | None
    append: list[bytes]
    blocks: list[tuple[str, int, bytes]]
    size: int


def encode_step(run_id: str, step: Step) -> EncodedStep:
    """Encode ``step``; raises ``StoreError`` when it belongs to another run or cannot be stored."""
    if step.run.run_id != run_id:
        raise StoreError(f"step of run {step.run.run_id!r} saved under {run_id!r}")
    run = encode(step.run)
    checkpoint = encode(step.checkpoint)
    base = [encode(m) for m in step.context.base] if step.context.base is not None else None
    append = [encode(m) for m in step.context.append]
    blocks = [(b.id, b.position, encode(b)) for b in step.blocks]
    size = len(run) + len(checkpoint) + sum(map(len, append)) + sum(len(b[2]) for b in blocks)
    size += sum(map(len, base)) if base is not None else 0
    return EncodedStep(run, checkpoint, base, append, blocks, size)


def decode_snapshot(
    run: bytes,
    checkpoint: bytes,
    context: Iterable[bytes],
    calls: Iterable[bytes],
    blocks: Iterable[bytes],
    *,
    call_ids: Iterable[str] | None = None,
    sort_blocks: bool = False,
) -> RunSnapshot:
    """The run these stored documents hold, in the order given.

    With ``call_ids`` (the calls' ids, in the same order) it is a ``StoredSnapshot``: the
    context, calls and blocks are decoded when first read, once their envelopes are checked
    here (``framed``); without, or when a document is not framed as this version writes it,
    each is decoded now. Each document is parsed once, from its bytes; the documents of one
    kind in one call. ``sort_blocks``: the blocks come in no order; they are sorted by position.

    Raises:
        FormatVersionError: The checkpoint was written in a format this version does not read.
    """
    cp = decode(checkpoint, Checkpoint)
    if cp.format != CHECKPOINT_FORMAT:
        raise FormatVersionError("checkpoint", cp.format, CHECKPOINT_FORMAT)
    record = decode(run, RunRecord)
    context, calls, blocks = list(context), list(calls), list(blocks)
    if call_ids is not None and framed(context) and framed(calls) and framed(blocks):
        return StoredSnapshot.of(
            record,
            cp,
            context,
            list(zip(call_ids, calls, strict=True)),
            blocks,
            sort_blocks=sort_blocks,
        )
    snap = RunSnapshot(
        run=record,
        checkpoint=cp,
        context=decode_all(context, Message),
        calls=decode_all(calls, CallRecord),
        blocks=decode_all(blocks, Block),
    )
    if sort_blocks:
        snap.blocks.sort(key=_position)
    return snap


def _position(block: Block) -> int:
    return block.position


@dataclass(slots=True)
class DumpRows:
    """A run tree's rows for the SQL stores' tables, in their column order.

    Attributes:
        runs: ``runs`` (run id, agent, status, created, updated, steps, record, checkpoint).
        context: ``context`` (run id, index, message).
        calls: ``calls`` (run id, call id, rev, status, record).
        blocks: ``blocks`` (run id, block id, position, block).
        feed: ``feed`` (run id, seq, message id, revision, message).
        consumed: ``feed_state`` (run id, consumed), for feeds consumed past 0.
    """

    runs: list[tuple[Any, ...]]
    context: list[tuple[str, int, bytes]]
    calls: list[tuple[str, str, int, str, bytes]]
    blocks: list[tuple[str, str, int, bytes]]
    feed: list[tuple[str, int, str, str, bytes]]
    consumed: list[tuple[str, int]]


def dump_rows(dump: RunDump) -> DumpRows:
    """The rows ``restore_run`` inserts for ``dump`` on SQLite and PostgreSQL."""
    runs = [
        (
            x.run.run_id,
            x.run.agent,
            x.run.status,
            to_us(x.run.created_at),
            to_us(x.run.updated_at),
            x.run.steps,
            encode(x.run),
            encode(x.checkpoint),
        )
        for x in dump.runs
    ]
    return DumpRows(
        runs=runs,
        context=[(x.run.run_id, i, encode(m)) for x in dump.runs for i, m in enumerate(x.context)],
        calls=[
            (x.run.run_id, c.id, c.rev, c.status, encode(c)) for x in dump.runs for c in x.calls
        ],
        blocks=[(x.run.run_id, b.id, b.position, encode(b)) for x in dump.runs for b in x.blocks],
        feed=[
            (f.run_id, m.seq, m.id, m.revision, encode(m)) for f in dump.feeds for m in f.messages
        ],
        consumed=[(f.run_id, f.consumed) for f in dump.feeds if f.consumed],
    )


def run_row(run_id: str, step: Step, enc: EncodedStep) -> tuple[Any, ...]:
    """The ``runs`` row a step writes, in the columns' order.

    (run_id, agent, status, created_us, updated_us, steps, record, checkpoint): every SQL
    store's upsert, and PostgreSQL's fast statement's first parameters.
    """
    run = step.run
    return (
        run_id,
        run.agent,
        run.status,
        to_us(run.created_at),
        to_us(run.updated_at),
        run.steps,
        enc.run,
        enc.checkpoint,
    )
