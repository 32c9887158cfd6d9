"""A step encoded for storage, the same way for every store."""

from __future__ import annotations

from dataclasses import dataclass

from steadyrun._codec import encode
from steadyrun._errors import StoreError
from steadyrun.records import Step

__all__ = ["EncodedStep", "encode_step"]


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
