"""Retrying model calls: exponential backoff with jitter, the provider's retry-after, a budget.

The policy (which errors, how long to wait, when to give up) is ours; the retry loop is
tenacity's ``AsyncRetrying``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)

from steadyrun._errors import UsageError
from steadyrun.models._errors import ProviderError

__all__ = ["RetryPolicy", "call_with_retries"]

T = TypeVar("T")


@dataclass(kw_only=True, frozen=True, slots=True)
class RetryPolicy:
    """How a provider call is retried.

    Only errors marked retryable (rate limits, overload, server errors, timeouts, connection
    failures) are retried; authentication failures, bad requests and context overflows are not.

    Attributes:
        max_attempts: Attempts in all, the first included (1: never retry).
        initial_delay: Seconds before the first retry.
        max_delay: Longest wait between attempts (a longer retry-after ends the retries).
        multiplier: Growth of the delay per attempt.
        jitter: Share of each delay drawn at random (0.2: the delay is 80-120% of nominal).
        budget: Seconds all attempts together may take; no retry starts past it.
    """

    max_attempts: int = 4
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.2
    budget: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UsageError("RetryPolicy.max_attempts must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise UsageError("RetryPolicy.jitter must be between 0 and 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.budget < 0:
            raise UsageError("RetryPolicy delays and budget must not be negative")

    def delay(self, attempt: int, error: ProviderError, rng: Callable[[], float]) -> float:
        """Seconds to wait before attempt ``attempt + 1`` after ``error``."""
        if error.retry_after is not None:
            return max(0.0, error.retry_after)
        nominal = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return nominal * (1 - self.jitter + 2 * self.jitter * rng())


NO_RETRY = RetryPolicy(max_attempts=1)


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: Callable[[], float] = random.random,
) -> T:
    """Run ``call``, retrying retryable ``ProviderError``s by ``policy`` (through tenacity).

    Cancellation is never retried: it stops the request at once. The last error is raised when
    the attempts, the budget, or ``max_delay`` (for a longer retry-after) run out.
    """
    started = clock()

    def wait(state: RetryCallState) -> float:
        # Asked only after a retryable error (see ``retry`` below).
        error = state.outcome.exception() if state.outcome is not None else None
        assert isinstance(error, ProviderError)
        return policy.delay(state.attempt_number, error, rng)

    attempts = stop_after_attempt(policy.max_attempts)

    def stop(state: RetryCallState) -> bool:
        # tenacity sets upcoming_sleep (from ``wait``) before it asks ``stop``. The budget is
        # measured on our clock, which tests replace, rather than tenacity's own.
        upcoming = state.upcoming_sleep
        too_long = upcoming > policy.max_delay or clock() - started + upcoming > policy.budget
        return attempts(state) or too_long

    async def attempt() -> T:
        # tenacity awaits only coroutine functions; ``call`` may be any callable giving an
        # awaitable.
        return await call()

    retrying = AsyncRetrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, ProviderError) and exc.retryable),
        stop=stop,
        wait=wait,
        sleep=sleep,
        reraise=True,  # the typed ProviderError, not tenacity's RetryError
    )
    return await retrying(attempt)
