"""Golden stored documents of format 1: today's code must read them and write them identically.

If this fails after a change to a stored type, the stored format changed: bump the format
version (``steadyrun._codec.FORMAT`` or ``CHECKPOINT_FORMAT``) with a one-line summary, keep a
reader for the old version, and add new golden files. Regenerate only for a new version:
``python tests/test_golden.py``.

One change keeps the format: an optional field (default ``None``) added to a stored type.
Releases before it ignore the field; this one reads documents without it as ``None``. Copy the
files of the types it changes to ``first/`` (unless a copy is there: it holds the format's first
documents) and regenerate; ``first/`` must still read as the samples. Fields added so far:
``CallDecision.original_arguments``, ``RunRecord.agent_version``, ``CallRecord.settled_by``,
``InputRequest.answered_by``/``answered_at``, ``RunRecord.cancelled_by``,
``Block.role``/``message_id``/``by``/``at``/``usage``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from steadyrun._codec import decode, encode
from steadyrun.chat import (
    MediaPart,
    MediaRef,
    Message,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from steadyrun.records import (
    Block,
    CallDecision,
    CallRecord,
    Checkpoint,
    ContextChange,
    InputRequest,
    RunRecord,
    Step,
)
from steadyrun.stores import FeedMessage

GOLDEN = Path(__file__).parent / "golden" / "v1"
FIRST = GOLDEN / "first"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
REF = MediaRef(key="k/receipt.png", mime="image/png", size=2048, sha256="0f" * 32)

ASSISTANT = Message(
    role="assistant",
    parts=[
        ThinkingPart(text="check the order", signature="sig=="),
        TextPart(text="Let me look — один момент."),
        ToolCallPart(call_id="call_1", name="lookup", arguments='{"id": "A-1"}'),
    ],
)
CALL = CallRecord(
    id="m1.c1",
    model_call_id="m1",
    provider_call_id="call_1",
    name="refund",
    arguments='{"order_id": "A-1", "amount_cents": 4999}',
    rev=3,
    status="needs_review",
    result="may or may not have taken effect",
    media=[REF],
    started_at=T0,
    completed_at=T0,
    side_effects=True,
    payload={"queue": "bank", "n": [1, 2]},
    decision=CallDecision(approve=True, reason="ok", decided_at=T0),
    input_request=InputRequest(
        wait_id="w1", prompt="Which card?", response_schema={"type": "string"}
    ),
    notes={"guard": "checked"},
)
SAMPLES: dict[str, tuple[Any, Any]] = {
    "message": (ASSISTANT, Message),
    "tool_message": (
        Message(
            role="tool",
            parts=[ToolResultPart(call_id="call_1", name="lookup", content="{}", media=[REF])],
        ),
        Message,
    ),
    "user_message": (
        Message(
            role="user", parts=[TextPart(text="hi"), MediaPart(ref=REF)], id="u1", revision="2"
        ),
        Message,
    ),
    "response": (
        ModelResponse(
            message=ASSISTANT,
            finish_reason="tool_calls",
            usage=Usage(requests=1, input_tokens=100, output_tokens=20, cache_read_tokens=60),
            model_name="m",
            provider_details={"request_id": "req_1"},
        ),
        ModelResponse,
    ),
    "call": (CALL, CallRecord),
    "checkpoint": (
        Checkpoint(
            phase="batch",
            turn=1,
            iteration=2,
            model_calls=2,
            claimed_through=3,
            batch=["m2.c1"],
            next_position=4,
            context_length=5,
            seen_inputs=["u1@1"],
        ),
        Checkpoint,
    ),
    "step": (
        Step(
            run=RunRecord(
                run_id="r",
                agent="support",
                usage=Usage(requests=2),
                created_at=T0,
                updated_at=T0,
                steps=3,
            ),
            checkpoint=Checkpoint(),
            context=ContextChange(append=[ASSISTANT]),
            blocks=[Block(id="m1.b1", kind="content", position=0, text="x", model_call_id="m1")],
            calls=[CALL],
        ),
        Step,
    ),
    "feed_message": (FeedMessage(seq=1, id="u1", content="hi", media=[REF]), FeedMessage),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_golden_documents_read_and_write_identically(name: str) -> None:
    value, tp = SAMPLES[name]
    stored = (GOLDEN / f"{name}.json").read_bytes()
    assert decode(stored, tp) == value
    assert encode(value) == stored


@pytest.mark.parametrize("name", sorted(p.stem for p in FIRST.glob("*.json")))
def test_documents_written_before_optional_fields_were_added_still_read(name: str) -> None:
    value, tp = SAMPLES[name]
    assert decode((FIRST / f"{name}.json").read_bytes(), tp) == value


if __name__ == "__main__":
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, (value, _) in SAMPLES.items():
        (GOLDEN / f"{name}.json").write_bytes(encode(value))
