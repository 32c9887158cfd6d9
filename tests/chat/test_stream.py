"""Stream accumulation: deltas of a response add back up to it; malformed streams are refused."""

import asyncio
from collections.abc import AsyncIterator, Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyrun._errors import ModelError
from steadyrun.chat import (
    Message,
    ModelResponse,
    ResponseAccumulator,
    ResponseDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
    accumulate,
    accumulate_async,
    deltas_of,
)

# -- strategies ------------------------------------------------------------------------------

texts = st.text(max_size=40)
names = st.text(min_size=1, max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
details = st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3)

# A streamed response holds only what a model produces: text, thinking and tool calls in an
# assistant message. Tool calls need an id and a name; a call streamed without argument
# fragments accumulates to "{}", so generated arguments are non-empty (see the test below).
response_parts = st.one_of(
    st.builds(TextPart, text=texts),
    st.builds(ThinkingPart, text=texts, signature=st.none() | texts, provider_details=details),
    st.builds(
        ToolCallPart,
        call_id=names,
        name=names,
        arguments=st.text(min_size=1, max_size=40),
        provider_details=details,
    ),
)
counts = st.integers(min_value=0, max_value=10**6)
usages = st.builds(
    Usage,
    requests=counts,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=counts,
    cache_write_tokens=counts,
    reasoning_tokens=counts,
)
responses = st.builds(
    ModelResponse,
    message=st.builds(
        Message, role=st.just("assistant"), parts=st.lists(response_parts, max_size=6)
    ),
    finish_reason=st.sampled_from(["stop", "tool_calls", "length", "content_filter", "error"]),
    usage=usages,
    model_name=st.none() | texts,
    provider_details=details,
)
chunks = st.integers(min_value=0, max_value=12)


async def agen(deltas: Iterable[ResponseDelta]) -> AsyncIterator[ResponseDelta]:
    for delta in deltas:
        await asyncio.sleep(0)
        yield delta


# -- round trips -----------------------------------------------------------------------------


@given(responses, chunks)
def test_deltas_accumulate_back_to_the_response(response: ModelResponse, chunk: int) -> None:
    deltas = deltas_of(response, chunk=chunk)
    assert deltas[-1].part == "finish"
    assert accumulate(deltas) == response


@given(responses, chunks)
def test_async_accumulation_gives_the_same_response(response: ModelResponse, chunk: int) -> None:
    deltas = deltas_of(response, chunk=chunk)
    assert asyncio.run(accumulate_async(agen(deltas))) == response


@given(responses, st.integers(min_value=1, max_value=12))
def test_fragments_are_at_most_chunk_long(response: ModelResponse, chunk: int) -> None:
    for delta in deltas_of(response, chunk=chunk):
        assert len(delta.text) <= chunk
        assert len(delta.arguments) <= chunk


@given(responses, chunks)
def test_accumulator_used_directly(response: ModelResponse, chunk: int) -> None:
    acc = ResponseAccumulator()
    for delta in deltas_of(response, chunk=chunk):
        acc.add(delta)
    assert acc.response() == response
    assert acc.response() == response  # reading the response does not consume the accumulator


def test_chunked_text_is_split_by_characters() -> None:
    response = ModelResponse(
        message=Message(role="assistant", parts=[TextPart(text="日本語テキスト")]),
        finish_reason="stop",
    )
    deltas = deltas_of(response, chunk=3)
    assert [d.text for d in deltas if d.part == "text"] == ["日本語", "テキス", "ト"]
    assert accumulate(deltas) == response


def test_interleaved_indexes_are_assembled_per_part() -> None:
    deltas = [
        ResponseDelta(part="tool_call", index=1, call_id="c1", name="search", arguments='{"q"'),
        ResponseDelta(part="text", index=0, text="Look"),
        ResponseDelta(part="tool_call", index=1, arguments=': "x"}'),
        ResponseDelta(part="text", index=0, text="ing"),
        ResponseDelta(part="finish", finish_reason="tool_calls", usage=Usage(requests=1)),
    ]
    response = accumulate(deltas)
    assert response.message.parts == [
        TextPart(text="Looking"),
        ToolCallPart(call_id="c1", name="search", arguments='{"q": "x"}'),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(requests=1)


def test_tool_call_without_argument_fragments_gets_empty_object() -> None:
    deltas = [
        ResponseDelta(part="tool_call", call_id="c1", name="now"),
        ResponseDelta(part="finish", finish_reason="tool_calls"),
    ]
    assert accumulate(deltas).message.tool_calls == [
        ToolCallPart(call_id="c1", name="now", arguments="{}")
    ]


def test_later_finish_deltas_add_details_and_replace_usage() -> None:
    deltas = [
        ResponseDelta(part="finish", model_name="m1", provider_details={"a": 1}),
        ResponseDelta(
            part="finish",
            finish_reason="stop",
            usage=Usage(output_tokens=5),
            provider_details={"b": 2},
        ),
    ]
    response = accumulate(deltas)
    assert response.model_name == "m1"
    assert response.provider_details == {"a": 1, "b": 2}
    assert response.usage == Usage(output_tokens=5)
    assert response.message == Message(role="assistant", parts=[])


# -- refused streams -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "deltas",
    [
        [],
        [ResponseDelta(part="text", text="hello")],
        [ResponseDelta(part="finish", usage=Usage(requests=1))],
    ],
    ids=["empty", "no-finish", "finish-without-reason"],
)
async def test_stream_without_finish_reason_is_refused(deltas: list[ResponseDelta]) -> None:
    with pytest.raises(ModelError, match="finish"):
        accumulate(deltas)
    with pytest.raises(ModelError, match="finish"):
        await accumulate_async(agen(deltas))


@pytest.mark.parametrize(
    "first",
    [
        ResponseDelta(part="tool_call", name="search", arguments="{}"),
        ResponseDelta(part="tool_call", call_id="c1", arguments="{}"),
        ResponseDelta(part="tool_call", call_id="", name="", arguments="{}"),
    ],
    ids=["no-id", "no-name", "empty-id-and-name"],
)
async def test_tool_call_without_id_or_name_is_refused(first: ResponseDelta) -> None:
    deltas = [first, ResponseDelta(part="finish", finish_reason="tool_calls")]
    with pytest.raises(ModelError, match="no id or name"):
        accumulate(deltas)
    with pytest.raises(ModelError, match="no id or name"):
        await accumulate_async(agen(deltas))


@pytest.mark.parametrize(
    ("first", "second"),
    [("text", "thinking"), ("thinking", "tool_call"), ("tool_call", "text")],
)
async def test_index_switching_part_kind_is_refused(first: str, second: str) -> None:
    deltas = [
        ResponseDelta(part=first, index=2, call_id="c", name="n"),  # type: ignore[arg-type]
        ResponseDelta(part=second, index=2, call_id="c", name="n"),  # type: ignore[arg-type]
        ResponseDelta(part="finish", finish_reason="stop"),
    ]
    with pytest.raises(ModelError, match="switched"):
        accumulate(deltas)
    with pytest.raises(ModelError, match="switched"):
        await accumulate_async(agen(deltas))


def test_part_details_travel_with_their_fragments() -> None:
    deltas = [
        ResponseDelta(part="thinking", text="a", provider_details={"redacted": "x"}),
        ResponseDelta(part="thinking", text="b", signature="", provider_details={"n": 1}),
        ResponseDelta(part="tool_call", index=1, call_id="c", name="t", provider_details={}),
        ResponseDelta(part="finish", finish_reason="tool_calls", model_name=""),
    ]
    response = accumulate(deltas)
    assert response.message.parts == [
        ThinkingPart(text="ab", signature="", provider_details={"redacted": "x", "n": 1}),
        ToolCallPart(call_id="c", name="t", arguments="{}", provider_details={}),
    ]
    assert response.model_name == ""
    assert response.provider_details is None
