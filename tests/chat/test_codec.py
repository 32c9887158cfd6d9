"""The versioned codec: chat values round-trip through dumps/loads; bad documents are refused."""

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyrun._errors import FormatVersionError, StoreError
from steadyrun.chat import (
    FORMAT,
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Part,
    ResponseDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    Usage,
    dumps,
    loads,
)

# -- strategies ------------------------------------------------------------------------------

texts = st.text(max_size=30)
opt_texts = st.none() | texts
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
details = st.none() | st.dictionaries(texts, json_values, max_size=4)
media_refs = st.builds(
    MediaRef, key=texts, mime=texts, size=st.integers(min_value=0), sha256=opt_texts
)

text_parts = st.builds(TextPart, text=texts)
thinking_parts = st.builds(ThinkingPart, text=texts, signature=opt_texts, provider_details=details)
tool_call_parts = st.builds(
    ToolCallPart, call_id=texts, name=texts, arguments=texts, provider_details=details
)
tool_result_parts = st.builds(
    ToolResultPart,
    call_id=texts,
    name=texts,
    content=texts,
    is_error=st.booleans(),
    media=st.lists(media_refs, max_size=3),
)
media_parts = st.builds(MediaPart, ref=media_refs)
parts = st.one_of(text_parts, thinking_parts, tool_call_parts, tool_result_parts, media_parts)

messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    parts=st.lists(parts, max_size=5),
    id=opt_texts,
    revision=opt_texts,
    meta=st.none() | st.dictionaries(texts, texts, max_size=3),
)
tool_definitions = st.builds(
    ToolDefinition,
    name=texts,
    description=texts,
    parameters=st.dictionaries(texts, json_values, max_size=4),
    strict=st.booleans(),
)
settings = st.builds(
    ModelSettings,
    temperature=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    max_tokens=st.none() | st.integers(min_value=0),
    stop=st.none() | st.lists(texts, max_size=3),
    tool_choice=st.none() | st.sampled_from(["auto", "none", "required"]),
    extra=details,
)
requests = st.builds(
    ModelRequest,
    instructions=texts,
    messages=st.lists(messages, max_size=4),
    tools=st.lists(tool_definitions, max_size=3),
    settings=settings,
)
counts = st.integers(min_value=0, max_value=10**12)
usages = st.builds(
    Usage,
    requests=counts,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=counts,
    cache_write_tokens=counts,
    reasoning_tokens=counts,
)
finish_reasons = st.sampled_from(["stop", "tool_calls", "length", "content_filter", "error"])
responses = st.builds(
    ModelResponse,
    message=messages,
    finish_reason=finish_reasons,
    usage=usages,
    model_name=opt_texts,
    provider_details=details,
)
deltas = st.builds(
    ResponseDelta,
    part=st.sampled_from(["text", "thinking", "tool_call", "finish"]),
    index=st.integers(min_value=0, max_value=100),
    text=texts,
    signature=opt_texts,
    call_id=opt_texts,
    name=opt_texts,
    arguments=texts,
    finish_reason=st.none() | finish_reasons,
    usage=st.none() | usages,
    model_name=opt_texts,
    provider_details=details,
)
chat_values = st.one_of(
    parts, media_refs, messages, tool_definitions, settings, requests, usages, responses, deltas
)


def envelope(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw)
    assert isinstance(doc, dict)
    return doc


# -- round trips -----------------------------------------------------------------------------


@given(chat_values)
def test_round_trip_by_own_type(value: Any) -> None:
    raw = dumps(value)
    assert isinstance(raw, bytes)
    assert envelope(raw)["format"] == FORMAT
    back = loads(raw, type(value))
    assert back == value
    assert back is not value


@given(parts)
def test_part_round_trips_through_the_union(part: Any) -> None:
    back = loads(dumps(part), Part)
    assert type(back) is type(part)
    assert back == part


@given(st.lists(messages, max_size=5))
def test_list_of_messages_round_trips(msgs: list[Message]) -> None:
    assert loads(dumps(msgs, list[Message]), list[Message]) == msgs
    # Without a declared type the list is serialised by inference, and reads back the same.
    assert loads(dumps(msgs), list[Message]) == msgs


@given(messages)
def test_loads_accepts_str_as_well_as_bytes(message: Message) -> None:
    assert loads(dumps(message).decode(), Message) == message


def test_every_part_kind_keeps_its_tag_and_class() -> None:
    ref = MediaRef(key="k/1", mime="image/png", size=3, sha256="ab")
    msg = Message(
        role="assistant",
        parts=[
            TextPart(text="héllo ✓ 日本"),
            ThinkingPart(text="", signature="sig", provider_details={"redacted": [1, {"a": None}]}),
            ToolCallPart(call_id="c1", name="search", arguments='{"q": "x"}'),
            ToolResultPart(call_id="c1", name="search", content="", is_error=True, media=[ref]),
            MediaPart(ref=ref),
        ],
        id="m1",
        revision="2",
        meta={"source": "test"},
    )
    raw = dumps(msg)
    kinds = [p["kind"] for p in envelope(raw)["data"]["parts"]]
    assert kinds == ["text", "thinking", "tool_call", "tool_result", "media"]
    back = loads(raw, Message)
    assert back == msg
    assert [type(p) for p in back.parts] == [type(p) for p in msg.parts]
    assert back.parts[1].provider_details is not msg.parts[1].provider_details  # type: ignore[union-attr]


def test_unicode_is_stored_as_utf8_not_escaped() -> None:
    raw = dumps(TextPart(text="日本語 ✓"))
    assert "日本語 ✓".encode() in raw


# -- refused documents -----------------------------------------------------------------------

unknown_formats = (
    st.integers().filter(lambda n: n != FORMAT)
    | st.text(max_size=5)
    | st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.lists(st.integers(), max_size=2)
)


@given(unknown_formats, messages)
def test_unknown_format_is_refused(fmt: Any, message: Message) -> None:
    doc = envelope(dumps(message))
    doc["format"] = fmt
    with pytest.raises(FormatVersionError) as info:
        loads(json.dumps(doc), Message)
    assert info.value.found == fmt
    assert info.value.known == FORMAT
    assert isinstance(info.value, StoreError)


@given(st.binary(max_size=40))
def test_garbage_bytes_are_a_store_error(raw: bytes) -> None:
    with pytest.raises(StoreError):
        loads(raw, Message)


@given(json_values.filter(lambda v: not (isinstance(v, dict) and "format" in v and "data" in v)))
def test_json_that_is_not_an_envelope_is_a_store_error(value: Any) -> None:
    with pytest.raises(StoreError) as info:
        loads(json.dumps(value), Message)
    assert not isinstance(info.value, FormatVersionError)


@pytest.mark.parametrize(
    ("data", "tp"),
    [
        ({"role": "user", "parts": "not a list"}, Message),
        ({"role": "robot"}, Message),
        ({"parts": []}, Message),
        ({"kind": "bogus", "text": "x"}, Part),
        ({"kind": "text"}, Part),
        ({"message": {"role": "assistant"}, "finish_reason": "maybe"}, ModelResponse),
        ({"requests": "many"}, Usage),
        ([{"role": "user"}, 3], list[Message]),
        (None, ModelRequest),
        ({"name": "t", "description": "d", "parameters": []}, ToolDefinition),
    ],
)
def test_wrong_shape_is_a_store_error(data: Any, tp: Any) -> None:
    raw = json.dumps({"format": FORMAT, "data": data})
    with pytest.raises(StoreError) as info:
        loads(raw, tp)
    assert not isinstance(info.value, FormatVersionError)


@pytest.mark.parametrize(
    "value",
    [
        ToolCallPart(call_id="c", name="t", provider_details={"obj": object()}),
        ModelSettings(extra={"fn": len}),
        ModelSettings(extra={"raw": b"\xff"}),
        TextPart(text="half a pair \ud83d"),
    ],
    ids=["object", "function", "non-utf8-bytes", "lone-surrogate"],
)
def test_a_value_without_a_json_form_is_a_store_error(value: Any) -> None:
    with pytest.raises(StoreError, match="cannot store"):
        dumps(value)


# -- usage -----------------------------------------------------------------------------------

USAGE_FIELDS = [
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
]


@given(usages, usages, usages)
def test_usage_addition_is_associative(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)


@given(usages, usages)
def test_usage_addition_sums_every_field(a: Usage, b: Usage) -> None:
    total = a + b
    for name in USAGE_FIELDS:
        assert getattr(total, name) == getattr(a, name) + getattr(b, name)
    assert total.total_tokens == a.total_tokens + b.total_tokens
    assert a + b == b + a
    assert a + Usage() == a
    assert total is not a and total is not b


@given(usages, usages)
def test_usage_subtraction_gives_back_what_was_added(a: Usage, b: Usage) -> None:
    assert (a + b) - a == b
    assert (a + b) - b == a
    assert a - Usage() == a
