"""The record of one tool call, and the pure rules by which concurrent writers combine."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from steadyrun._errors import ConflictError, NotPendingError
from steadyrun.chat import MediaRef
from steadyrun.records._copy import copied

__all__ = [
    "ACTIVE_STATUSES",
    "SETTLED_STATUSES",
    "CallCompletion",
    "CallDecision",
    "CallRecord",
    "CallStatus",
    "CallUpdate",
    "Handover",
    "InputRequest",
    "is_settled",
    "merge_call",
    "overlay_external",
    "replaced_whole",
]

CallStatus = str
"""A call's status. The runtime writes the values in ``ACTIVE_STATUSES`` and ``SETTLED_STATUSES``;
a host may write statuses of its own, which the runtime treats as settled (final)."""

ACTIVE_STATUSES = frozenset({"queued", "running", "waiting", "awaiting_decision", "awaiting_input"})
"""Statuses of a call that is not finished."""

SETTLED_STATUSES = frozenset(
    {"succeeded", "failed", "interrupted", "needs_review", "rejected", "cancelled"}
)
"""Final statuses the runtime knows."""

Handover = Literal["", "await", "detached", "submitted"]
"""Who advances a call other than the runtime: nobody (``""``), the host while the run waits
(``await``), the host while the run carries on (``detached``), the host's decision
(``submitted``)."""


def is_settled(status: CallStatus) -> bool:
    """Whether a status is final: a settled status the runtime knows, or any the host invented."""
    return status not in ACTIVE_STATUSES


@dataclass(kw_only=True, slots=True)
class CallDecision:
    """A host's decision on a call paused for one. Final once written.

    Attributes:
        approve: Whether the call may run.
        reason: Why (shown to the model on rejection).
        arguments: Edited arguments (JSON text) the call runs with instead of the model's.
        original_arguments: The model's own arguments (JSON text) when ``arguments`` edits
            them, so the decision shows both (``None`` in decisions stored before it existed).
        decided_by: Who decided, for the record.
        decided_at: When.
    """

    approve: bool
    reason: str | None = None
    arguments: str | None = None
    original_arguments: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None


@dataclass(kw_only=True, slots=True)
class InputRequest:
    """A tool's request for input from a person or system, answered by ``wait_id``.

    Attributes:
        wait_id: Identifies this wait; answers name it.
        prompt: What to ask.
        response_schema: JSON schema the answer must satisfy.
        state: Opaque state the tool gets back with the answer.
        response: The answer, once given.
        answered_by: Who gave it (the host's word, e.g. the API token's principal); ``None``
            when unsaid or in answers stored before it existed.
        answered_at: When it was given (``None`` in answers stored before it existed).
    """

    wait_id: str
    prompt: str
    response_schema: dict[str, Any] | None = None
    state: Any = None
    response: Any = None
    answered_by: str | None = None
    answered_at: datetime | None = None


@dataclass(kw_only=True, slots=True)
class CallCompletion:
    """A structured value a completion tool ended the run with.

    Attributes:
        value: The completion value.
        fixed: Whether new input may supersede it (a fixed completion ends the run regardless).
    """

    value: Any
    fixed: bool = False


@dataclass(kw_only=True, slots=True)
class CallRecord:
    """The persisted record of one tool call.

    Every write the runtime makes is a complete snapshot at its ``rev``; ``merge_call`` decides
    what of it a store keeps.

    Attributes:
        id: Record id, assigned by the runtime, unique within the run.
        parent_id: The delegation call a sub-agent call belongs to.
        model_call_id: The model call that requested this call.
        provider_call_id: The id the model gave the call.
        name: The tool name.
        arguments: The arguments as JSON text (as the model wrote them).
        rev: Increases with every change the runtime makes.
        status: See ``CallStatus``.
        result: Model-visible result, or the receipt of a handed-over call.
        error: Model-visible error text.
        media: Media of the result, by reference.
        started_at: When the tool body started.
        completed_at: When the call settled.
        replayable: The model may call again when the outcome is unknown.
        side_effects: The call may change state outside the run (the default: only a tool
            declared without side effects records ``False``).
        handover: Who advances the call other than the runtime.
        payload: Opaque data given when handed over or submitted.
        completion: The structured value of a completion tool.
        decision: The host's decision; runtime snapshots never change it.
        input_request: An open or answered request for input.
        notes: Annotations by tools, guards and extensions; replaced as a whole by newer snapshots.
        settled_by: Who recorded the outcome, when the host settled the call (``None`` when
            the runtime did, when unsaid, or in records stored before it existed).
    """

    id: str
    parent_id: str | None = None
    model_call_id: str = ""
    provider_call_id: str = ""
    name: str
    arguments: str = "{}"
    rev: int = 0
    status: CallStatus = "queued"
    result: str | None = None
    error: str | None = None
    media: list[MediaRef] = field(default_factory=list)
    started_at: datetime | None = None
    completed_at: datetime | None = None
    replayable: bool = False
    side_effects: bool = True
    handover: Handover = ""
    payload: Any = None
    completion: CallCompletion | None = None
    decision: CallDecision | None = None
    input_request: InputRequest | None = None
    notes: dict[str, str] = field(default_factory=dict)
    settled_by: str | None = None

    @property
    def settled(self) -> bool:
        """Whether the call's status is final."""
        return is_settled(self.status)


_UNSET: Any = object()


@dataclass(kw_only=True, slots=True)
class CallUpdate:
    """A write the host makes outside the runtime; fields left unset are not changed.

    ``media=[]`` clears the media; leaving ``media`` unset keeps it. ``input_response`` answers
    the wait ``wait_id``: given, the answer is refused unless that wait is the call's current one.
    ``by`` names who writes (kept with an answer or an outcome the write records; a decision
    names its own ``decided_by``); ``at`` is when (kept with an answer).
    """

    status: CallStatus | None = None
    result: str | None = _UNSET
    error: str | None = _UNSET
    media: list[MediaRef] | None = None
    completed_at: datetime | None = _UNSET
    handover: Handover | None = None
    payload: Any = _UNSET
    decision: CallDecision | None = None
    input_response: Any = _UNSET
    wait_id: str | None = None
    by: str | None = None
    at: datetime | None = None


def merge_call(stored: CallRecord | None, incoming: CallRecord) -> CallRecord:
    """The record a store keeps when the runtime writes ``incoming`` over ``stored``.

    - A snapshot whose ``rev`` is not above the stored one changes nothing.
    - A newer snapshot replaces the descriptive fields (name, arguments, ids, traits) and notes.
    - It replaces the outcome (status, result, error, media, times, completion, handover,
      payload, input request) only while the stored call is neither settled nor handed over:
      settled outcomes are final.
    - Where the host recorded a handover first, a newer snapshot that hands over too may only
      fill in a missing payload, and a receipt while the call has neither result nor error.
      Status and times stay the host's.
    - A stored decision stays; the snapshot's decision is taken only when none is stored.
    """
    # ``copied`` is ``dataclasses.replace`` at a tenth of its cost (each settle of the loop
    # merges twice: the runtime's copy and the store's).
    if stored is None:
        return copied(incoming)
    if incoming.rev <= stored.rev:
        return stored
    merged = copied(
        stored,
        rev=incoming.rev,
        parent_id=incoming.parent_id,
        model_call_id=incoming.model_call_id,
        provider_call_id=incoming.provider_call_id,
        name=incoming.name,
        arguments=incoming.arguments,
        replayable=incoming.replayable,
        side_effects=incoming.side_effects,
        notes=dict(incoming.notes),
        decision=stored.decision if stored.decision is not None else incoming.decision,
    )
    if stored.settled:
        return merged
    if stored.handover:
        if incoming.handover:
            if merged.payload is None:
                merged.payload = incoming.payload
            if merged.result is None and merged.error is None:
                merged.result = incoming.result
        return merged
    merged.status = incoming.status
    merged.result = incoming.result
    merged.error = incoming.error
    merged.media = list(incoming.media)
    merged.started_at = incoming.started_at
    merged.completed_at = incoming.completed_at
    merged.completion = incoming.completion
    merged.handover = incoming.handover
    merged.payload = incoming.payload
    merged.input_request = _merge_input(stored.input_request, incoming.input_request)
    return merged


def replaced_whole(stored: CallRecord) -> bool:
    """Whether ``merge_call`` turns any newer snapshot over ``stored`` into that snapshot itself.

    True while nothing of the record is the host's or final: not settled, not handed over, no
    decision, no input request, no host settlement (``settled_by``). A newer snapshot whose
    ``settled_by`` is ``None`` then merges to itself, so a store that keeps this fact (and the
    ``rev``) beside a record may write such a snapshot without reading the record first.
    """
    return (
        not stored.settled
        and not stored.handover
        and stored.decision is None
        and stored.input_request is None
        and stored.settled_by is None
    )


def whole_rev(record: CallRecord) -> int | None:
    """What a store keeps beside ``record`` to merge over it later without reading it.

    ``record.rev`` when ``merge_call`` replaces the record whole (``replaced_whole``), else
    ``None``; ``merges_whole`` reads it.
    """
    return record.rev if replaced_whole(record) else None


def merges_whole(whole: int | None, incoming: CallRecord) -> bool:
    """Whether ``merge_call`` over a stored record gives ``incoming`` itself.

    ``whole`` is the stored record's ``whole_rev``: a newer snapshot that names no host
    settlement replaces such a record whole, so a store may write it without reading it.
    """
    return whole is not None and incoming.rev > whole and incoming.settled_by is None


def _merge_input(stored: InputRequest | None, incoming: InputRequest | None) -> InputRequest | None:
    # The host writes the response; a runtime snapshot of the same wait must not erase it.
    if (
        stored is not None
        and incoming is not None
        and stored.wait_id == incoming.wait_id
        and stored.response is not None
        and incoming.response is None
    ):
        return replace(
            incoming,
            response=stored.response,
            answered_by=stored.answered_by,
            answered_at=stored.answered_at,
        )
    if (
        stored is not None
        and incoming is not None
        and stored.wait_id == incoming.wait_id
        and incoming.answered_by is None
        and incoming.answered_at is None
    ):
        # A runtime snapshot carries the answer it read, but who gave it (and when) is the
        # host's word.
        return replace(incoming, answered_by=stored.answered_by, answered_at=stored.answered_at)
    return incoming


def overlay_external(stored: CallRecord, update: CallUpdate) -> CallRecord:
    """``stored`` with a host write applied; ``rev`` and every other field are kept.

    The host is authoritative for status, result, error, media, completion time, handover,
    payload, decision and input response, but its answers are final: the first decision, input
    response or outcome (a settled status) written for a call wins. A store applies this inside
    its write transaction, so of two hosts answering at once exactly one wins:

    - A decision is taken while the call is ``awaiting_decision`` and has none. The same
      decision again (approval, reason and arguments) changes nothing; a different one raises
      ``ConflictError``.
    - An input response is taken by the call's open wait (``wait_id``, when given, must name
      it) while the call is ``awaiting_input``. The same answer again changes nothing; a
      different one raises ``ConflictError``.
    - An outcome is taken while the host owns the call's outcome: handed over (an awaited or
      detached call, a submission), needing review, or still running (the outside system may
      answer before the runtime recorded the handover). Once settled, the same outcome again
      (status, result, error) changes nothing; a different one raises ``ConflictError``.

    A repeated answer leaves the stored one whole (who decided, when the call completed).

    Raises:
        ConflictError: A different answer of the same kind was recorded first.
        NotPendingError: The call is not waiting for this kind of answer (nothing to answer).
    """
    out = replace(stored)
    if update.decision is not None and not _repeats_decision(stored, update.decision):
        out.decision = update.decision
    if update.input_response is not _UNSET and not _repeats_answer(stored, update):
        assert out.input_request is not None  # checked by _repeats_answer
        out.input_request = replace(
            out.input_request,
            response=update.input_response,
            answered_by=update.by,
            answered_at=update.at,
        )
    settles = update.status is not None and is_settled(update.status)
    if not (settles and _repeats_outcome(stored, update)):
        if settles:
            out.settled_by = update.by
        if update.status is not None:
            out.status = update.status
        if update.result is not _UNSET:
            out.result = update.result
        if update.error is not _UNSET:
            out.error = update.error
        if update.completed_at is not _UNSET:
            out.completed_at = update.completed_at
    if update.media is not None:
        out.media = list(update.media)
    if update.handover is not None:
        out.handover = update.handover
    if update.payload is not _UNSET:
        out.payload = update.payload
    return out


def _repeats_decision(stored: CallRecord, decision: CallDecision) -> bool:
    """Whether ``decision`` repeats the stored one; raises when it may not be taken."""
    first = stored.decision
    if first is not None:
        if (first.approve, first.reason, _json(first.arguments)) == (
            decision.approve,
            decision.reason,
            _json(decision.arguments),
        ):
            return True
        verdict = "approved" if first.approve else "rejected"
        raise ConflictError(f"call {stored.id!r} was already {verdict}; decisions are final")
    if stored.status != "awaiting_decision":
        raise NotPendingError(
            f"call {stored.id!r} is {stored.status!r}, not waiting for a decision"
        )
    return False


def _repeats_answer(stored: CallRecord, update: CallUpdate) -> bool:
    """Whether the update's input response repeats the stored one; raises when not taken."""
    request = stored.input_request
    wait = update.wait_id if update.wait_id is not None else "the wait"
    if request is None or (update.wait_id is not None and request.wait_id != update.wait_id):
        raise NotPendingError(
            f"{wait!r} of call {stored.id!r} is not open (the call is {stored.status!r}); "
            "a late or duplicate answer changes nothing"
        )
    if request.response is not None:
        if request.response == update.input_response:
            return True
        raise ConflictError(
            f"wait {request.wait_id!r} of call {stored.id!r} was already answered; "
            "answers are final"
        )
    if stored.status != "awaiting_input":
        raise NotPendingError(
            f"wait {request.wait_id!r} of call {stored.id!r} is not open (the call is "
            f"{stored.status!r}); a late or duplicate answer changes nothing"
        )
    return False


def _repeats_outcome(stored: CallRecord, update: CallUpdate) -> bool:
    """Whether a settling update repeats the stored outcome; raises when it may not be taken."""
    owned = (
        stored.status in ("running", "needs_review")
        or (stored.status == "waiting" and stored.handover in ("await", "detached"))
        or (stored.status == "awaiting_decision" and stored.handover == "submitted")
    )
    if owned:
        return False
    if stored.settled:
        result = stored.result if update.result is _UNSET else update.result
        error = stored.error if update.error is _UNSET else update.error
        if (update.status, result, error) == (stored.status, stored.result, stored.error):
            return True
        raise ConflictError(
            f"call {stored.id!r} is already settled ({stored.status!r}); its outcome is final"
        )
    handed = f" (handover {stored.handover!r})" if stored.handover else ""
    raise NotPendingError(
        f"call {stored.id!r} is {stored.status!r}{handed}: there is no outcome of it for the "
        "host to record"
    )


def _json(text: str | None) -> Any:
    # Edited arguments compare as JSON values: the same object written with other spacing or
    # key order is the same decision.
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
