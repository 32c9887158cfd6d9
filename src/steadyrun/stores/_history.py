"""The step history of runs: one small entry per saved step, and the contexts of past steps.

``StepHistory`` is a port of its own beside ``Store``: every steadyrun store implements it
(the entry is written by ``save_step`` in the step's own transaction), and a store of your own
that does not still works for everything else; ``Runtime.history`` and ``Runtime.fork`` need
it and say so.

How each store keeps it: an entry per step (``StepEntry``, without its defaults: a few hundred
bytes, the same at step 10 and at step 10,000) keyed by run and step number, and the context
log in segments: a rewrite (``ContextChange.base``) moves the current log to the archive as
the segment it was and starts the next one, so the context after any listed step is the first
``checkpoint.context_length`` messages of its segment. Nothing else a step writes changes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import TypeAdapter

from steadyrun._codec import FORMAT
from steadyrun._fast_json import writer
from steadyrun.chat import Message
from steadyrun.records import CHECKPOINT_FORMAT, Checkpoint, Step
from steadyrun.records._history import StepCall, StepEnding, StepEntry

__all__ = ["StepHistory", "encode_entry", "entry_of", "next_segment", "start_of"]

_ENTRY: TypeAdapter[StepEntry] = TypeAdapter(StepEntry)
_CHECKPOINT: TypeAdapter[Checkpoint] = TypeAdapter(Checkpoint)
_NO_CHECKPOINT = {"checkpoint"}
# msgspec writes both parts where it writes pydantic's bytes (``_fast_json``): 2-3 times faster
_QUICK_BODY = writer(StepEntry, omit_defaults=True, exclude=frozenset(_NO_CHECKPOINT))
_QUICK_CHECKPOINT = writer(Checkpoint, omit_defaults=True)
_DOC_HEAD = b'{"format":%d,"data":' % FORMAT
_CP_HEAD = b'{"format":%d' % CHECKPOINT_FORMAT


@runtime_checkable
class StepHistory(Protocol):
    """The steps of runs, as saved, and the context after each.

    Contract: every ``save_step`` writes the entry of its step (``entry_of``) in the same
    transaction as the step, so a refused or failed step leaves no entry; a step saved again
    under the same number replaces its entry. ``history`` lists a run's entries by step number
    (``[]`` for an unknown run). ``context_at`` returns the context as it stood after a listed
    step, also after later rewrites of the context (``None`` when the step is not listed).
    """

    async def history(self, run_id: str) -> list[StepEntry]:
        """The run's step entries, by step number."""
        ...

    async def context_at(self, run_id: str, step: int) -> list[Message] | None:
        """The run's context after ``step``, or ``None`` when the history has no such step."""
        ...


def next_segment(previous: int | None, rewrites: bool) -> tuple[int, bool]:
    """The segment of a step, and whether the current log must be archived first.

    Args:
        previous: The segment of the run's latest earlier entry (``None``: no earlier entry).
        rewrites: Whether the step writes a new base.

    Returns:
        ``(segment, archive)``: a rewrite after an earlier entry archives the current log as
        that entry's segment and starts the next; a first entry, or a run whose earlier steps
        predate the history, starts at 0 without archiving (no entry refers to that log).
    """
    if previous is None:
        return 0, False
    if rewrites:
        return previous + 1, True
    return previous, False


def start_of(step: Step, end: int) -> int:
    """Where the first message ``step`` writes lands, on a log of ``end`` messages."""
    if step.context.base is not None:
        return 0
    return end if step.context.start is None else step.context.start


def entry_of(step: Step, segment: int, start: int) -> StepEntry:
    """The history entry of ``step``, saved in ``segment`` from position ``start`` on."""
    run = step.run
    ending = None
    if run.status in ("completed", "failed"):
        ending = StepEnding(
            text=run.text,
            completion=run.completion,
            completion_reason=run.completion_reason,
            error_kind=run.error_kind,
            error=run.error,
        )
    return StepEntry(
        step=run.steps,
        at=run.updated_at,
        status=run.status,
        segment=segment,
        start=start,
        rewrote=step.context.base is not None,
        calls=[StepCall(id=c.id, status=c.status) for c in step.calls],
        usage=run.usage,
        checkpoint=step.checkpoint,
        ending=ending,
    )


def encode_entry(entry: StepEntry) -> bytes:
    """The entry as a versioned document, without the fields at their defaults.

    The checkpoint keeps its own ``format`` whatever the default, so a later checkpoint
    version never reads an old entry as its own.
    """
    # Two documents straight to JSON, spliced (two entries per loop iteration): msgspec's
    # where it writes pydantic's bytes, else pydantic-core's (a fourth of the time of plain
    # data through ``json.dumps``). The entry's JSON always has ``step``, so it is never
    # ``{}``; the checkpoint's may be.
    body = _QUICK_BODY(entry) if _QUICK_BODY is not None else None
    if body is None:
        body = _ENTRY.serializer.to_json(entry, exclude_defaults=True, exclude=_NO_CHECKPOINT)
    cp = _QUICK_CHECKPOINT(entry.checkpoint) if _QUICK_CHECKPOINT is not None else None
    if cp is None:
        cp = _CHECKPOINT.serializer.to_json(entry.checkpoint, exclude_defaults=True)
    if entry.checkpoint.format == CHECKPOINT_FORMAT:  # left out as the default: put it first
        cp = _CP_HEAD + (b"}" if cp == b"{}" else b"," + cp[1:])
    return _DOC_HEAD + body[:-1] + b',"checkpoint":' + cp + b"}}"
