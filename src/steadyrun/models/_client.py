"""The ``ModelClient`` port: one required method, streaming optional."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeGuard, runtime_checkable

from steadyrun._errors import UsageError
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, accumulate_async

__all__ = [
    "ModelClient",
    "StreamingModelClient",
    "allow_model_requests",
    "can_stream",
    "check_model_requests_allowed",
    "model_requests",
    "model_requests_allowed",
    "stream_response",
]


@runtime_checkable
class ModelClient(Protocol):
    """A model the runtime can call. Providers and test doubles implement this."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer one request."""
        ...


@runtime_checkable
class StreamingModelClient(ModelClient, Protocol):
    """A model that can also stream; the deltas must accumulate to what ``respond`` returns."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Answer one request as a stream of deltas ending with a ``finish`` delta."""
        ...


def can_stream(client: object) -> TypeGuard[StreamingModelClient]:
    """``isinstance(client, StreamingModelClient)``, without walking the protocol each time.

    The runtime asks at every model call whose fragments someone follows; on Python 3.11 the
    protocol's ``isinstance`` collects its members through its classes each time (about 1% of
    a service's CPU). Its rule for method members is the one kept here: the object has each
    of them and none is ``None``.
    """
    return (
        getattr(client, "stream", None) is not None and getattr(client, "respond", None) is not None
    )


async def stream_response(client: ModelClient, request: ModelRequest) -> ModelResponse:
    """Call ``client`` by streaming when it can, and return the accumulated response."""
    if can_stream(client):
        return await accumulate_async(client.stream(request))
    return await client.respond(request)


_allowed = True


def allow_model_requests(allowed: bool) -> None:
    """Allow or block requests to real model providers in this process (tests block them)."""
    global _allowed
    _allowed = allowed


@contextmanager
def model_requests(allowed: bool) -> Iterator[None]:
    """Allow or block real model requests inside a ``with`` block (tests of adapters)."""
    global _allowed
    before, _allowed = _allowed, allowed
    try:
        yield
    finally:
        _allowed = before


def model_requests_allowed() -> bool:
    """Whether real model requests are allowed in this process."""
    return _allowed


def check_model_requests_allowed(provider: str) -> None:
    """Raise ``UsageError`` when real model requests are blocked; providers call this first."""
    if not _allowed:
        raise UsageError(
            f"a real request to {provider} was blocked: real model requests are disabled "
            "(steadyrun.models.allow_model_requests(False)); use steadyrun.testing.ScriptedModel "
            "or FunctionModel in tests"
        )
