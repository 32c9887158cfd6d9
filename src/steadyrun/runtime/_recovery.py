"""Recovery settlement: what a call that started and never settled becomes on resume.

A pure function of the record, so the rule is tested on its own (property tests) and
hosts can apply the same rule outside a run.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from steadyrun.records import CallRecord
from steadyrun.runtime._texts import Texts

__all__ = ["interrupted_outcome", "needs_recovery", "settle_interrupted"]


def needs_recovery(call: CallRecord) -> bool:
    """Whether a call started and never settled while the runtime owned it."""
    return call.status == "running" and not call.handover


def interrupted_outcome(call: CallRecord, texts: Texts) -> tuple[str, str]:
    """The status and model-visible result of an interrupted call, by its traits.

    Replayable calls, and calls without side effects, are ``interrupted``: the model may call
    again. A call with side effects that is not replayable is ``needs_review``: its outcome is
    unknown and must be checked before anything repeats it.
    """
    fmt = {"name": call.name, "call_id": call.provider_call_id or call.id}
    if call.replayable:
        return "interrupted", texts.interrupted_replayable.format(**fmt)
    if not call.side_effects:
        return "interrupted", texts.interrupted.format(**fmt)
    return "needs_review", texts.needs_review.format(**fmt)


def settle_interrupted(call: CallRecord, now: datetime, texts: Texts) -> CallRecord:
    """The record of ``call`` settled by recovery; unchanged when it needs no recovery."""
    if not needs_recovery(call):
        return call
    status, result = interrupted_outcome(call, texts)
    return replace(call, rev=call.rev + 1, status=status, result=result, completed_at=now)
