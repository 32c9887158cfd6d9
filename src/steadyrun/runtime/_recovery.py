"""Recovery settlement: what a call that started and never settled becomes on resume.

A pure function of the record, so the rule is tested on its own (property tests) and
hosts can apply the same rule outside a run.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from steadyrun._errors import SubAgentInterrupted
from steadyrun._texts import Texts
from steadyrun.records import CallRecord, RunSnapshot, Step

__all__ = [
    "ORIGINAL_ARGUMENTS",
    "apply_answers",
    "blocks_run",
    "end_child_run",
    "interrupted_outcome",
    "needs_recovery",
    "outcome_unknown",
    "settle_interrupted",
]


def needs_recovery(call: CallRecord) -> bool:
    """Whether a call started and never settled while the runtime owned it."""
    return call.status == "running" and not call.handover


def outcome_unknown(call: CallRecord) -> bool:
    """Whether a call cut off mid-body may have taken effect, so that nothing may repeat it.

    True unless the call is replayable or declared without side effects: ``side_effects`` is
    true unless the tool declared it false, so a tool that declares no traits is unknown
    (safe by default).
    """
    return call.side_effects and not call.replayable


def interrupted_outcome(call: CallRecord, texts: Texts) -> tuple[str, str]:
    """The status and model-visible result of an interrupted call, by its traits.

    Replayable calls, and calls declared without side effects, are ``interrupted``: the model
    may call again. Any other call is ``needs_review``: its outcome is unknown and must be
    checked before anything repeats it (``outcome_unknown``): a tool that declares no traits
    is reviewed (safe by default).
    """
    fmt = {"name": call.name, "call_id": call.provider_call_id or call.id}
    if call.replayable:
        return "interrupted", texts.interrupted_replayable.format(**fmt)
    if not outcome_unknown(call):
        return "interrupted", texts.interrupted.format(**fmt)
    return "needs_review", texts.needs_review.format(**fmt)


def settle_interrupted(call: CallRecord, now: datetime, texts: Texts) -> CallRecord:
    """The record of ``call`` settled by recovery; unchanged when it needs no recovery."""
    if not needs_recovery(call):
        return call
    status, result = interrupted_outcome(call, texts)
    return replace(call, rev=call.rev + 1, status=status, result=result, completed_at=now)


def end_child_run(child: RunSnapshot, now: datetime, texts: Texts, reason: str) -> Step | None:
    """The step that ends a sub-agent run its parent's recovery will not resume (pure).

    A crash inside a side effect of the sub-agent leaves its run ``running`` with that call
    ``running``; the delegation becomes ``needs_review`` and nothing continues the child. Its
    started calls are settled as recovery settles any (so the unknown one is ``needs_review``),
    its queued calls ``cancelled`` (they never run), and the run ``failed`` with
    ``SubAgentInterrupted`` and ``reason``, at phase ``done``: a later resume of it runs
    nothing.

    Args:
        child: The sub-agent run as stored.
        now: The time of the settlement.
        texts: The run's texts (the settled calls' results).
        reason: The run's error, for the host: what happened and which call needs review.

    Returns:
        The step to save, or ``None`` when the run is no longer running (already ended).
    """
    if child.run.status != "running":
        return None
    calls = []
    for call in child.calls:
        if needs_recovery(call):
            calls.append(settle_interrupted(call, now, texts))
        elif call.status == "queued":
            calls.append(
                replace(call, rev=call.rev + 1, status="cancelled", error=reason, completed_at=now)
            )
    run = replace(
        child.run,
        status="failed",
        error_kind=SubAgentInterrupted.__name__,
        error=reason,
        updated_at=now,
        steps=child.run.steps + 1,
    )
    checkpoint = replace(child.checkpoint, phase="done", batch=[])
    return Step(run=run, checkpoint=checkpoint, calls=calls)


ORIGINAL_ARGUMENTS = "steadyrun.original_arguments"
"""Note key keeping the model's own arguments of a call a reviewer edited."""


def apply_answers(call: CallRecord, now: datetime, texts: Texts) -> CallRecord | None:
    """What a call paused for a person becomes on resume, or ``None`` while it still waits.

    An approved confirmation is queued to run (with the reviewer's arguments, if edited); a
    rejected one is settled ``rejected`` and never runs; an answered input request is queued
    to re-enter its tool with the answer.
    """
    if call.status == "awaiting_decision" and not call.handover and call.decision is not None:
        decision = call.decision
        if decision.approve:
            queued = replace(call, rev=call.rev + 1, status="queued")
            if decision.arguments is not None and decision.arguments != call.arguments:
                notes = {**call.notes, ORIGINAL_ARGUMENTS: call.arguments}
                queued = replace(queued, arguments=decision.arguments, notes=notes)
            return queued
        reason = texts.rejected_reason.format(reason=decision.reason) if decision.reason else ""
        return replace(
            call,
            rev=call.rev + 1,
            status="rejected",
            result=texts.rejected.format(name=call.name, reason=reason),
            completed_at=now,
        )
    request = call.input_request
    if call.status == "awaiting_input" and request is not None and request.response is not None:
        return replace(call, rev=call.rev + 1, status="queued")
    return None


def blocks_run(call: CallRecord, *, strict_settlement: bool) -> bool:
    """Whether the run must wait (suspended) for someone else to advance this call.

    Awaited results, confirmations and input requests block; detached calls and submissions
    do not (the model has their receipt). With strict settlement a call needing review blocks
    until the host settles it.
    """
    if call.status == "waiting":
        return call.handover == "await"
    if call.status == "awaiting_decision":
        return call.handover != "submitted"
    if call.status == "awaiting_input":
        return True
    return strict_settlement and call.status == "needs_review"
