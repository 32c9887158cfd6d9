"""Temporal's RPC failures as steadyrun's ``EngineUnavailableError``, for ``TemporalRuns``.

``TemporalRuns`` turns Temporal's "not found" into the typed error of the run's state (none,
ended, cancelled). Every other ``RPCError`` (the frontend unreachable, a deadline, a refusal
of the cluster's own) would otherwise reach the caller as ``temporalio``'s: the decorator
here gives it steadyrun's type, so a host (the service, the CLI, a user's code) handles an
engine that does not answer as it handles a store that fails.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from temporalio.service import RPCError

from steadyrun._errors import EngineUnavailableError

__all__ = ["engine_unavailable", "typed_rpc"]

P = ParamSpec("P")
T = TypeVar("T")


def engine_unavailable(exc: RPCError, what: str) -> EngineUnavailableError:
    """``exc`` (raised while doing ``what``) as steadyrun's error, with Temporal's words."""
    status = exc.status.name if exc.status is not None else "UNKNOWN"
    return EngineUnavailableError(
        f"Temporal did not take {what} ({status}: {exc.message}); whether it reached the run "
        "is not known: ask again once the cluster answers (the same request again changes "
        "nothing)",
        status,
    )


def typed_rpc(what: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """A ``TemporalRuns`` method whose escaping ``RPCError`` becomes ``EngineUnavailableError``."""

    def wrap(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        @functools.wraps(method)
        async def typed(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await method(*args, **kwargs)
            except RPCError as exc:
                raise engine_unavailable(exc, what) from exc

        return typed

    return wrap
