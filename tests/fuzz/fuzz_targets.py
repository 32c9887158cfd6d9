"""Fuzz targets for the parsers of model output and stored documents, for atheris and tests.

Each target takes bytes and feeds them to one parser. It returns quietly when the parser
accepts the input or refuses it with its typed error; anything else (``KeyError``,
``AttributeError``, ``TypeError``, ``RecursionError``...) escapes, which is a finding.

| target | parser | typed refusal |
|---|---|---|
| ``tool_arguments`` | ``Tool.validate`` (tool-call arguments JSON, invalid UTF-8 included) | ``ToolArgumentsError`` |
| ``codec`` | ``steadyrun._codec.decode`` of run, call, step and feed documents | ``StoreError`` |
| ``openai_chat`` | ``chat_response`` (chat completion body to ``ModelResponse``) | ``ModelError`` |
| ``openai_responses`` | ``responses_response`` (Responses API body) | ``ModelError`` |
| ``anthropic`` | ``response_from_message`` (Messages API body, as the SDK builds it) | ``ModelError`` |
| ``google`` | ``response_from`` (Gemini body, as the SDK validates it) | ``ModelError`` |

The OpenAI and Anthropic SDKs build their response objects without validating field types,
so those parsers may meet any JSON shape a server sends; the Gemini SDK validates first, so
its target feeds only what validation lets through.

Run one under atheris, steadyrun instrumented for coverage: ``python tests/fuzz/test_atheris.py
TARGET [CORPUS_DIR] -atheris_runs=N -max_total_time=S`` (libFuzzer flags). ``seeds(target)``
gives a small corpus of valid inputs to start from.
"""  # noqa: E501

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import steadyrun as sr
from steadyrun._codec import decode, encode
from steadyrun.chat import Message
from steadyrun.models._anthropic_convert import response_from_message
from steadyrun.models._google_response import response_from
from steadyrun.models._openai_chat import chat_response
from steadyrun.models._openai_responses import responses_response
from steadyrun.records import CallRecord, RunSnapshot, Step
from steadyrun.stores import FeedMessage


@sr.tool
def refund(order_id: str, amount_cents: int, items: list[dict[str, int]] | None = None) -> str:
    """Refund part of an order.

    Args:
        order_id: The order.
        amount_cents: How much, in cents.
        items: Line items and quantities.
    """
    return order_id


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None  # not JSON: the SDKs never hand such a body over


def tool_arguments(data: bytes) -> None:
    """Arguments JSON as a model wrote it; invalid UTF-8 becomes lone surrogates."""
    with contextlib.suppress(sr.ToolArgumentsError):
        refund.validate(data.decode("utf-8", "surrogateescape"))


CODEC_TYPES: list[Any] = [CallRecord, RunSnapshot, Step, FeedMessage, list[Message]]


def codec(data: bytes) -> None:
    """A stored document of each type (the first byte picks it)."""
    if not data:
        return
    tp = CODEC_TYPES[data[0] % len(CODEC_TYPES)]
    with contextlib.suppress(sr.StoreError):
        decode(data[1:], tp)


def openai_chat(data: bytes) -> None:
    """A chat completion body."""
    body = _json(data)
    if isinstance(body, dict):
        with contextlib.suppress(sr.ModelError):
            chat_response(body, request_id=None, model="m", provider="openai")


def openai_responses(data: bytes) -> None:
    """A Responses API body."""
    body = _json(data)
    if isinstance(body, dict):
        with contextlib.suppress(sr.ModelError):
            responses_response(body, request_id=None, model="m", provider="openai")


def anthropic(data: bytes) -> None:
    """A Messages API body, built the way the SDK builds it (``construct_type``, lenient)."""
    from anthropic._models import construct_type
    from anthropic.types import Message as AnthropicMessage

    body = _json(data)
    if isinstance(body, dict):
        message = construct_type(type_=AnthropicMessage, value=body)
        with contextlib.suppress(sr.ModelError):
            response_from_message(message, None)  # type: ignore[arg-type]


def google(data: bytes) -> None:
    """A Gemini body that passes the SDK's validation."""
    from google.genai import types

    body = _json(data)
    if not isinstance(body, dict):
        return
    try:
        response = types.GenerateContentResponse.model_validate(body)
    except Exception:  # the SDK's refusal (pydantic's, and some of its own enum errors)
        return
    with contextlib.suppress(sr.ModelError):
        response_from(response, "gemini")


KNOWN_BUGS: dict[str, str] = {}
"""Targets whose parser is known to raise untyped errors on malformed bodies, and the file
where: such an error raised there is counted and passed over so fuzzing goes on looking for
others. Empty since the parsers raise ``MalformedResponse`` (the first fuzzing found four such
bodies: ``test_fuzz_properties.test_malformed_bodies_found_by_fuzzing_give_typed_errors``).
``FUZZ_STRICT=1`` turns this off."""

FOUND: dict[str, int] = {}


def known_bug(target: str, exc: BaseException) -> bool:
    """Whether ``exc`` is one of the known untyped errors of ``target``'s parser."""
    where = KNOWN_BUGS.get(target)
    if where is None or os.environ.get("FUZZ_STRICT") or isinstance(exc, sr.SteadyrunError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or not frames[-1].filename.endswith(where):
        return False
    key = f"{type(exc).__name__} in {frames[-1].name}"
    FOUND[key] = FOUND.get(key, 0) + 1
    return True


def tolerant(fn: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """``fn``, passing over its target's known bugs (named in ``FOUND``)."""
    name = next(k for k, v in TARGETS.items() if v is fn)

    def run(data: bytes) -> None:
        try:
            fn(data)
        except Exception as exc:
            if not known_bug(name, exc):
                raise

    return run


TARGETS: dict[str, Callable[[bytes], None]] = {
    "tool_arguments": tool_arguments,
    "codec": codec,
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "google": google,
}


def seeds(target: str) -> list[bytes]:
    """Valid inputs to start fuzzing ``target`` from."""
    call = {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": "{}"}}
    if target == "tool_arguments":
        return [b'{"order_id": "A-1", "amount_cents": 5, "items": [{"x": 1}]}', b"{}", b"[]"]
    if target == "codec":
        record = CallRecord(id="m1.c1", name="refund", arguments='{"a": 1}', status="running")
        feed = FeedMessage(id="in", revision="1", role="user", content="hi")
        return [bytes([0]) + encode(record), bytes([3]) + encode(feed)]
    if target == "openai_chat":
        message = {"role": "assistant", "content": "hi", "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        return [json.dumps({"id": "c", "model": "m", "choices": [choice], "usage": usage}).encode()]
    if target == "openai_responses":
        output = [
            {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "t"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "refund", "arguments": "{}"},
        ]
        body = {"id": "r", "status": "completed", "model": "m", "output": output}
        body["usage"] = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
        return [json.dumps(body).encode()]
    if target == "anthropic":
        content = [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "t1", "name": "refund", "input": {"order_id": "A"}},
        ]
        body = {"id": "m", "type": "message", "role": "assistant", "model": "c", "content": content}
        body |= {"stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 2}}
        return [json.dumps(body).encode()]
    if target == "google":
        parts = [{"text": "hi"}, {"functionCall": {"name": "refund", "args": {"order_id": "A"}}}]
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
        usage = {"promptTokenCount": 3, "candidatesTokenCount": 2}
        return [json.dumps({"candidates": [candidate], "usageMetadata": usage}).encode()]
    raise KeyError(target)


def main() -> None:
    """Fuzz ``sys.argv[1]`` with libFuzzer flags ``sys.argv[2:]`` (see ``test_atheris``)."""
    import atheris  # only here: the property tests import this module without it

    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], tolerant(target))
    atheris.Fuzz()
