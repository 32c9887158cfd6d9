"""``can_stream``: the runtime's test for a streaming model, as ``isinstance`` answers it.

``isinstance(client, StreamingModelClient)`` walks the protocol's classes at every call on
Python 3.11; the runtime asks it at each model call of a run whose fragments are followed.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from steadyrun.models import StreamingModelClient
from steadyrun.models._client import can_stream
from steadyrun.testing import FunctionModel, ScriptedModel, text


async def _respond(request: Any) -> Any:
    return text("hi")


async def _stream(request: Any) -> Any:
    yield None


class OnlyResponds:
    async def respond(self, request: Any) -> Any:
        return text("hi")


class StreamsNone(OnlyResponds):
    stream = None


CLIENTS = [
    FunctionModel(lambda r: text("hi")),
    ScriptedModel([text("hi")]),
    OnlyResponds(),
    StreamsNone(),
    SimpleNamespace(respond=_respond, stream=_stream),
    SimpleNamespace(respond=_respond),
    SimpleNamespace(stream=_stream),
    SimpleNamespace(respond=_respond, stream=None),
    SimpleNamespace(respond=None, stream=_stream),
    object(),
]


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: type(c).__name__)
def test_can_stream_answers_as_isinstance_does(client: object) -> None:
    assert can_stream(client) is isinstance(client, StreamingModelClient)


def test_the_answer_follows_the_instance_not_its_type() -> None:
    # Two objects of one type, one with a stream method and one without: no per-type answer.
    assert can_stream(SimpleNamespace(respond=_respond, stream=_stream))
    assert not can_stream(SimpleNamespace(respond=_respond))
