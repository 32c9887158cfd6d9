"""The merge rules of call records: ``merge_call`` (runtime writes) and ``overlay_external``."""

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from steadyrun._errors import ConflictError, NotPendingError
from steadyrun.chat import MediaRef
from steadyrun.records import (
    ACTIVE_STATUSES,
    SETTLED_STATUSES,
    CallCompletion,
    CallDecision,
    CallRecord,
    CallUpdate,
    InputRequest,
    is_settled,
    merge_call,
    merges_whole,
    overlay_external,
    replaced_whole,
    whole_rev,
)

# -- strategies ------------------------------------------------------------------------------

HOST_STATUS = "expired"
STATUSES = sorted(ACTIVE_STATUSES | SETTLED_STATUSES) + [HOST_STATUS]
HANDOVERS = ["", "await", "detached", "submitted"]

texts = st.text(max_size=10)
opt_texts = st.none() | texts
times = st.none() | st.datetimes(timezones=st.just(UTC))
payloads = st.none() | st.integers() | texts | st.dictionaries(texts, st.integers(), max_size=2)
media = st.lists(st.builds(MediaRef, key=texts, mime=texts, size=st.integers(0, 99)), max_size=2)
decisions = st.none() | st.builds(
    CallDecision, approve=st.booleans(), reason=opt_texts, arguments=opt_texts, decided_by=opt_texts
)
input_requests = st.none() | st.builds(
    InputRequest,
    wait_id=st.sampled_from(["w1", "w2"]),
    prompt=texts,
    state=payloads,
    response=payloads,
)
completions = st.none() | st.builds(CallCompletion, value=payloads, fixed=st.booleans())

records = st.builds(
    CallRecord,
    id=st.just("c1"),
    parent_id=opt_texts,
    model_call_id=texts,
    provider_call_id=texts,
    name=texts,
    arguments=texts,
    rev=st.integers(0, 8),
    status=st.sampled_from(STATUSES),
    result=opt_texts,
    error=opt_texts,
    media=media,
    started_at=times,
    completed_at=times,
    replayable=st.booleans(),
    side_effects=st.booleans(),
    handover=st.sampled_from(HANDOVERS),
    payload=payloads,
    completion=completions,
    decision=decisions,
    input_request=input_requests,
    notes=st.dictionaries(texts, texts, max_size=2),
)

DESCRIPTIVE = [
    "parent_id",
    "model_call_id",
    "provider_call_id",
    "name",
    "arguments",
    "replayable",
    "side_effects",
    "notes",
]
OUTCOME = [
    "status",
    "result",
    "error",
    "media",
    "started_at",
    "completed_at",
    "completion",
    "handover",
    "payload",
]


def fields(record: CallRecord, names: list[str]) -> dict[str, Any]:
    return {name: getattr(record, name) for name in names}


def newer(stored: CallRecord, incoming: CallRecord) -> CallRecord:
    """``incoming`` with a rev above ``stored``'s."""
    return replace(incoming, rev=stored.rev + 1 + incoming.rev)


# -- merge_call ------------------------------------------------------------------------------


@given(records, records)
def test_inputs_are_never_mutated(stored: CallRecord, incoming: CallRecord) -> None:
    before = copy.deepcopy((stored, incoming))
    merge_call(stored, incoming)
    merge_call(stored, newer(stored, incoming))
    merge_call(None, incoming)
    assert (stored, incoming) == before


@given(records, records)
def test_a_rev_not_above_the_stored_one_changes_nothing(
    stored: CallRecord, incoming: CallRecord
) -> None:
    incoming = replace(incoming, rev=min(incoming.rev, stored.rev))
    assert merge_call(stored, incoming) == stored


@given(records, records)
def test_rev_of_the_result_is_the_max(stored: CallRecord, incoming: CallRecord) -> None:
    assert merge_call(stored, incoming).rev == max(stored.rev, incoming.rev)


@given(records, records, opt_texts, opt_texts)
def test_a_record_replaced_whole_merges_to_the_newer_snapshot_itself(
    stored: CallRecord, incoming: CallRecord, stored_by: str | None, incoming_by: str | None
) -> None:
    # What lets a store write a newer runtime snapshot without reading the stored record
    # first (issue 20): when ``replaced_whole`` said so of the stored one, the merge is the
    # snapshot itself, unless the snapshot names a host settlement.
    stored = replace(stored, settled_by=stored_by)
    incoming = replace(newer(stored, incoming), settled_by=incoming_by)
    if replaced_whole(stored) and incoming.settled_by is None:
        assert merge_call(stored, incoming) == incoming
    # What a store keeps (``whole_rev``) and asks (``merges_whole``) says the same.
    assert merges_whole(whole_rev(stored), incoming) == (
        replaced_whole(stored) and incoming.settled_by is None
    )
    older = replace(incoming, rev=stored.rev)
    assert not merges_whole(whole_rev(stored), older)
    held = not replaced_whole(stored)
    assert held == (
        stored.settled
        or bool(stored.handover)
        or stored.decision is not None
        or stored.input_request is not None
        or stored.settled_by is not None
    )


@given(st.lists(records, min_size=1, max_size=12))
def test_rev_never_decreases_over_any_sequence_of_writes(writes: list[CallRecord]) -> None:
    stored: CallRecord | None = None
    for write in writes:
        merged = merge_call(stored, write)
        assert stored is None or merged.rev >= stored.rev
        stored = merged
    assert stored is not None
    assert stored.rev == max(w.rev for w in writes)


@given(records, records)
def test_a_settled_outcome_is_final(stored: CallRecord, incoming: CallRecord) -> None:
    stored = replace(stored, status=stored.status if stored.settled else "succeeded")
    merged = merge_call(stored, incoming)
    assert fields(merged, OUTCOME) == fields(stored, OUTCOME)
    assert merged.input_request == stored.input_request


@given(st.lists(records, min_size=1, max_size=12))
def test_once_settled_the_outcome_never_changes(writes: list[CallRecord]) -> None:
    stored: CallRecord | None = None
    frozen: dict[str, Any] | None = None
    for write in writes:
        stored = merge_call(stored, write)
        if frozen is not None:
            assert fields(stored, OUTCOME) == frozen
        elif stored.settled:
            frozen = fields(stored, OUTCOME)


@given(records, records)
def test_a_stored_decision_stays(stored: CallRecord, incoming: CallRecord) -> None:
    stored = replace(stored, decision=CallDecision(approve=False, reason="no"))
    assert merge_call(stored, incoming).decision == CallDecision(approve=False, reason="no")
    assert merge_call(stored, newer(stored, replace(incoming, decision=None))).decision == (
        CallDecision(approve=False, reason="no")
    )


@given(records, records)
def test_a_snapshot_decision_is_taken_when_none_is_stored(
    stored: CallRecord, incoming: CallRecord
) -> None:
    stored = replace(stored, decision=None)
    incoming = newer(stored, incoming)
    assert merge_call(stored, incoming).decision == incoming.decision


@given(st.lists(records, min_size=1, max_size=12))
def test_once_decided_the_decision_never_changes(writes: list[CallRecord]) -> None:
    stored: CallRecord | None = None
    for write in writes:
        merged = merge_call(stored, write)
        if stored is not None and stored.decision is not None:
            assert merged.decision == stored.decision
        stored = merged


@given(records, records)
def test_host_handover_first_keeps_status_and_times(
    stored: CallRecord, incoming: CallRecord
) -> None:
    stored = replace(
        stored,
        status=stored.status if not stored.settled else "waiting",
        handover=stored.handover or "await",
    )
    incoming = newer(stored, incoming)
    merged = merge_call(stored, incoming)
    kept = ["status", "started_at", "completed_at", "handover", "error", "media", "completion"]
    assert fields(merged, kept) == fields(stored, kept)
    assert merged.input_request == stored.input_request
    if incoming.handover and stored.payload is None:
        assert merged.payload == incoming.payload
    else:
        assert merged.payload == stored.payload
    if incoming.handover and stored.result is None and stored.error is None:
        assert merged.result == incoming.result
    else:
        assert merged.result == stored.result


def test_host_handover_first_fills_a_missing_payload_and_receipt() -> None:
    stored = CallRecord(id="c1", name="pay", rev=2, status="waiting", handover="await")
    incoming = replace(
        stored, rev=3, status="running", handover="await", payload={"p": 1}, result="receipt"
    )
    merged = merge_call(stored, incoming)
    assert (merged.status, merged.payload, merged.result) == ("waiting", {"p": 1}, "receipt")
    merged = merge_call(merged, replace(incoming, rev=4, payload={"p": 2}, result="other"))
    assert (merged.payload, merged.result) == ({"p": 1}, "receipt")


@given(records, records)
def test_a_newer_snapshot_replaces_descriptive_fields_and_notes(
    stored: CallRecord, incoming: CallRecord
) -> None:
    incoming = newer(stored, incoming)
    merged = merge_call(stored, incoming)
    assert fields(merged, DESCRIPTIVE) == fields(incoming, DESCRIPTIVE)
    assert merged.id == stored.id


@given(records, records)
def test_a_newer_snapshot_replaces_an_open_outcome(
    stored: CallRecord, incoming: CallRecord
) -> None:
    stored = replace(stored, status="running", handover="")
    incoming = newer(stored, incoming)
    merged = merge_call(stored, incoming)
    assert fields(merged, OUTCOME) == fields(incoming, OUTCOME)


@given(records, st.sampled_from(sorted(ACTIVE_STATUSES)), input_requests)
def test_an_answered_input_request_keeps_its_response(
    incoming: CallRecord, status: str, request: InputRequest | None
) -> None:
    answered = InputRequest(wait_id="w1", prompt="?", response={"ok": True})
    stored = CallRecord(id="c1", name="ask", rev=1, status=status, input_request=answered)
    incoming = replace(incoming, rev=2, input_request=request)
    merged = merge_call(stored, incoming)
    if request is not None and request.wait_id == "w1" and request.response is None:
        assert merged.input_request == replace(request, response={"ok": True})
    else:
        assert merged.input_request == request


@given(records)
def test_nothing_stored_gives_a_copy_of_the_snapshot(incoming: CallRecord) -> None:
    merged = merge_call(None, incoming)
    assert merged == incoming
    assert merged is not incoming


# -- is_settled ------------------------------------------------------------------------------


@given(st.text())
def test_any_status_the_runtime_does_not_know_is_settled(status: str) -> None:
    assert is_settled(status) is (status not in ACTIVE_STATUSES)


def test_known_statuses() -> None:
    assert not any(is_settled(s) for s in ACTIVE_STATUSES)
    assert all(is_settled(s) for s in SETTLED_STATUSES)
    assert is_settled(HOST_STATUS)
    assert CallRecord(id="c", name="t", status=HOST_STATUS).settled
    assert not CallRecord(id="c", name="t").settled


# -- overlay_external ------------------------------------------------------------------------

# Writes that carry no answer (no decision, input response or final status): applied as given.
UPDATE_VALUES: dict[str, Any] = {
    "status": st.sampled_from(sorted(ACTIVE_STATUSES)),
    "result": opt_texts,
    "error": opt_texts,
    "media": media,
    "completed_at": times,
    "handover": st.sampled_from(HANDOVERS),
    "payload": payloads,
}


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    chosen = draw(st.sets(st.sampled_from(sorted(UPDATE_VALUES))))
    return {name: draw(UPDATE_VALUES[name]) for name in sorted(chosen)}


@given(records, updates())
def test_overlay_applies_exactly_the_fields_set(stored: CallRecord, values: dict[str, Any]) -> None:
    before = copy.deepcopy(stored)
    out = overlay_external(stored, CallUpdate(**values))
    assert stored == before
    assert out == replace(stored, **values)
    assert out.rev == stored.rev
    assert fields(out, DESCRIPTIVE) == fields(stored, DESCRIPTIVE)


def test_overlay_with_nothing_set_keeps_the_record() -> None:
    stored = CallRecord(
        id="c1",
        name="t",
        rev=7,
        status="waiting",
        result="r",
        media=[MediaRef(key="k", mime="m", size=1)],
    )
    out = overlay_external(stored, CallUpdate())
    assert out == stored
    assert out is not stored


def test_overlay_media_empty_list_clears_unset_keeps() -> None:
    ref = MediaRef(key="k", mime="image/png", size=1)
    stored = CallRecord(id="c1", name="t", status="running", media=[ref])
    assert overlay_external(stored, CallUpdate(media=[])).media == []
    assert overlay_external(stored, CallUpdate(status="succeeded")).media == [ref]


def test_overlay_can_set_result_error_and_payload_to_none() -> None:
    stored = CallRecord(id="c1", name="t", result="r", error="e", payload={"a": 1})
    out = overlay_external(stored, CallUpdate(result=None, error=None, payload=None))
    assert (out.result, out.error, out.payload) == (None, None, None)


@given(payloads)
def test_overlay_input_response_answers_the_request(response: Any) -> None:
    request = InputRequest(wait_id="w1", prompt="name?", state={"step": 2})
    stored = CallRecord(id="c1", name="ask", rev=3, status="awaiting_input", input_request=request)
    out = overlay_external(stored, CallUpdate(input_response=response))
    assert out.input_request == replace(request, response=response)
    assert stored.input_request == request
    assert out.status == "awaiting_input" and out.rev == 3


def test_overlay_then_an_older_runtime_snapshot_changes_nothing() -> None:
    stored = CallRecord(id="c1", name="t", rev=4, status="waiting", handover="detached")
    settled = overlay_external(
        stored,
        CallUpdate(
            status="succeeded", result="done", completed_at=datetime(2024, 1, 1, tzinfo=UTC)
        ),
    )
    assert merge_call(settled, replace(stored, status="running")) == settled
    later = merge_call(settled, replace(stored, rev=5, status="running", result=None))
    assert (later.rev, later.status, later.result) == (5, "succeeded", "done")


# -- host answers are final ------------------------------------------------------------------
# The first decision, input response or outcome written for a call wins; the same one again
# changes nothing; a different one raises ConflictError. A store applies the rule inside its
# write transaction, so of two racing hosts exactly one wins.

edited = st.none() | st.dictionaries(texts, st.integers() | texts, max_size=2).map(json.dumps)
given_decisions = st.builds(
    CallDecision,
    approve=st.booleans(),
    reason=opt_texts,
    arguments=edited,
    original_arguments=st.none() | texts,
    decided_by=opt_texts,
    decided_at=times,
)
answers = payloads.filter(lambda v: v is not None)
OUTCOMES = sorted(SETTLED_STATUSES - {"needs_review"}) + [HOST_STATUS]
outcomes = st.fixed_dictionaries(
    {"status": st.sampled_from(OUTCOMES)},
    optional={"result": opt_texts, "error": opt_texts, "completed_at": times},
)
HOST_OWNED = [
    ("running", ""),
    ("running", "detached"),
    ("needs_review", ""),
    ("waiting", "await"),
    ("waiting", "detached"),
    ("awaiting_decision", "submitted"),
]


def same_decision(a: CallDecision, b: CallDecision) -> bool:
    def args(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    return (a.approve, a.reason, args(a.arguments)) == (b.approve, b.reason, args(b.arguments))


def host_owns(call: CallRecord) -> bool:
    return (call.status, call.handover) in HOST_OWNED or call.status in ("running", "needs_review")


def outcome_of(call: CallRecord, write: dict[str, Any]) -> tuple[Any, ...]:
    return (write["status"], write.get("result", call.result), write.get("error", call.error))


@given(records, given_decisions, given_decisions)
def test_the_first_decision_wins(
    stored: CallRecord, first: CallDecision, second: CallDecision
) -> None:
    stored = replace(stored, status="awaiting_decision", decision=None)
    decided = overlay_external(stored, CallUpdate(decision=first))
    assert decided == replace(stored, decision=first)
    if same_decision(first, second):
        assert overlay_external(decided, CallUpdate(decision=second)) == decided  # kept as is
    else:
        with pytest.raises(ConflictError, match="final"):
            overlay_external(decided, CallUpdate(decision=second))


@given(records, given_decisions)
def test_a_decision_on_a_call_not_waiting_for_one_is_refused(
    stored: CallRecord, decision: CallDecision
) -> None:
    assume(stored.status != "awaiting_decision")
    with pytest.raises(NotPendingError, match="not waiting for a decision"):
        overlay_external(replace(stored, decision=None), CallUpdate(decision=decision))


@given(records, answers, answers)
def test_the_first_answer_wins(stored: CallRecord, first: Any, second: Any) -> None:
    request = InputRequest(wait_id="w1", prompt="?")
    stored = replace(stored, status="awaiting_input", input_request=request)
    answered = overlay_external(stored, CallUpdate(input_response=first, wait_id="w1"))
    assert answered == replace(stored, input_request=replace(request, response=first))
    if first == second:
        assert overlay_external(answered, CallUpdate(input_response=second)) == answered
    else:
        with pytest.raises(ConflictError, match="already answered"):
            overlay_external(answered, CallUpdate(input_response=second, wait_id="w1"))


@given(records, answers, st.sampled_from(["w1", "w2", None]))
def test_an_answer_is_taken_only_by_its_open_wait(
    stored: CallRecord, answer: Any, wait_id: str | None
) -> None:
    request = stored.input_request
    update = CallUpdate(input_response=answer, wait_id=wait_id)
    if request is None or (wait_id is not None and request.wait_id != wait_id):
        with pytest.raises(NotPendingError, match="not open"):
            overlay_external(stored, update)
    elif request.response is not None:
        if request.response == answer:
            assert overlay_external(stored, update) == stored
        else:
            with pytest.raises(ConflictError):
                overlay_external(stored, update)
    elif stored.status != "awaiting_input":
        with pytest.raises(NotPendingError, match="not open"):
            overlay_external(stored, update)
    else:
        out = overlay_external(stored, update)
        assert out == replace(stored, input_request=replace(request, response=answer))


@given(records, st.sampled_from(HOST_OWNED), outcomes, outcomes)
def test_the_first_outcome_the_host_records_wins(
    stored: CallRecord,
    owned: tuple[str, str],
    first: dict[str, Any],
    second: dict[str, Any],
) -> None:
    stored = replace(stored, status=owned[0], handover=owned[1])
    settled = overlay_external(stored, CallUpdate(**first))
    assert settled == replace(stored, **first)
    if outcome_of(settled, second) == outcome_of(settled, first):
        assert overlay_external(settled, CallUpdate(**second)) == settled  # time kept too
    else:
        with pytest.raises(ConflictError, match="final"):
            overlay_external(settled, CallUpdate(**second))


@given(records, outcomes)
def test_an_outcome_for_a_call_the_host_does_not_own_is_refused(
    stored: CallRecord, outcome: dict[str, Any]
) -> None:
    assume(not host_owns(stored))
    if not stored.settled:
        with pytest.raises(NotPendingError, match="no outcome"):
            overlay_external(stored, CallUpdate(**outcome))
    elif outcome_of(stored, outcome) == (stored.status, stored.result, stored.error):
        assert overlay_external(stored, CallUpdate(**outcome)) == stored
    else:
        with pytest.raises(ConflictError, match="final"):
            overlay_external(stored, CallUpdate(**outcome))


@given(records, given_decisions, given_decisions)
def test_of_two_racing_decisions_exactly_one_is_stored(
    stored: CallRecord, a: CallDecision, b: CallDecision
) -> None:
    assume(not same_decision(a, b))
    stored = replace(stored, status="awaiting_decision", decision=None)
    for first, second in ((a, b), (b, a)):
        record = overlay_external(stored, CallUpdate(decision=first))
        with pytest.raises(ConflictError):
            overlay_external(record, CallUpdate(decision=second))
        assert record.decision == first
