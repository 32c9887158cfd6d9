"""What a store keeps of each step of a run, so its steps can be listed and forked from.

A store keeps a run's current state (one run row, one checkpoint, the context log, the current
call records); a ``StepEntry`` is the small part of each step it keeps besides: the checkpoint
and usage the step saved, where its messages lie in the context log, and the call snapshots
it carried. The messages themselves stay in the context log: a context rewrite starts a new
``segment`` of the log and the store keeps the replaced segment, so the context of every step
can be read back (``StepHistory.context_at``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from steadyrun.chat import Usage
from steadyrun.records._call import CallStatus
from steadyrun.records._step import Checkpoint, RunStatus

__all__ = ["StepCall", "StepEnding", "StepEntry"]


@dataclass(kw_only=True, slots=True)
class StepCall:
    """A call snapshot a step carried: its id and the status it had then.

    Attributes:
        id: The call record's id.
        status: Its status in that step.
    """

    id: str
    status: CallStatus | str


@dataclass(kw_only=True, slots=True)
class StepEnding:
    """How a run stood when a step ended it (completed or failed), as its run row said then.

    Attributes:
        text: The final text.
        completion: The structured completion value.
        completion_reason: Why a fallback completion was used.
        error_kind: The class name of the failure.
        error: The failure's message.
    """

    text: str | None = None
    completion: Any = None
    completion_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None


@dataclass(kw_only=True, slots=True)
class StepEntry:
    """One saved step, as the run's history lists it.

    Stored with defaults left out, so an entry costs about as much as the checkpoint it
    carries (a few hundred bytes), whatever the run's length.

    Attributes:
        step: The step's number (``RunRecord.steps`` after it); a step saved again under the
            same number replaces its entry.
        at: When it was saved (``RunRecord.updated_at``).
        status: The run's status after it.
        segment: Which segment of the context log the step's context lies in: 0 until the
            first rewrite, one more after each (``ContextChange.base``).
        start: Position in that segment of the first message the step wrote; the step's
            messages end at ``checkpoint.context_length``.
        rewrote: Whether the step rewrote the context (a new base: clearing, a summary, a
            reducer, a fork).
        calls: The call snapshots the step carried, in order (calls written between steps by
            ``save_call`` are not listed).
        usage: The run's usage after it.
        checkpoint: The checkpoint it saved.
        ending: The run row's outcome fields, when the step completed or failed the run.
    """

    step: int
    at: datetime | None = None
    status: RunStatus = "running"
    segment: int = 0
    start: int = 0
    rewrote: bool = False
    calls: list[StepCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    ending: StepEnding | None = None
