"""Retrying model calls: exponential backoff with jitter, the provider's retry-after, a budget."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

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
    """Run ``call``, retrying retryable ``ProviderError``s by ``policy``.

    Cancellation is never retried: it stops the request at once. The last error is raised when
    the attempts, the budget, or ``max_delay`` (for a longer retry-after) run out.
    """
    started = clock()
    attempt = 1
    while True:
        try:
            return await call()
        except ProviderError as error:
            if not error.retryable or attempt >= policy.max_attempts:
                raise
            wait = policy.delay(attempt, error, rng)
            if wait > policy.max_delay or clock() - started + wait > policy.budget:
                raise
            await sleep(wait)
            attempt += 1
