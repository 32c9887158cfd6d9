from __future__ import annotations

import asyncio

import pytest

import steadyrun as sr
from steadyrun.models import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    ProviderConnectionError,
    ProviderError,
    RateLimited,
    RetryPolicy,
    ServerError,
    call_with_retries,
    check_model_spec,
    error_for_status,
    register_provider,
    resolve_model,
)
from steadyrun.testing import ScriptedModel, text


@pytest.mark.parametrize(
    ("status", "message", "cls", "retryable"),
    [
        (429, "slow down", RateLimited, True),
        (529, "Overloaded", Overloaded, True),
        (503, "unavailable", Overloaded, True),
        (500, "boom", ServerError, True),
        (502, "bad gateway", ServerError, True),
        (401, "bad key", AuthenticationFailed, False),
        (403, "forbidden", AuthenticationFailed, False),
        (400, "missing field", BadRequest, False),
        (400, "This model's maximum context length is 8192 tokens", ContextOverflow, False),
        (None, "connection reset", ProviderConnectionError, True),
    ],
)
def test_errors_by_status(status: int | None, message: str, cls: type, retryable: bool) -> None:
    err = error_for_status(status, message, provider="p", code="c", body={"e": 1}, request_id="r")
    assert type(err) is cls
    assert err.retryable is retryable
    assert isinstance(err, sr.ModelError)
    assert (err.status, err.code, err.body, err.request_id) == (status, "c", {"e": 1}, "r")
    assert "request r" in str(err) and message in str(err)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(errors: list[Exception], result: str = "ok") -> tuple[list[int], object]:
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return calls, call


async def test_retryable_errors_back_off_with_jitter_within_bounds() -> None:
    clock = Clock()
    errs = [error_for_status(500, "x", provider="p") for _ in range(3)]
    calls, call = failing(errs)
    policy = RetryPolicy(max_attempts=4, initial_delay=1.0, multiplier=2.0, jitter=0.25)
    out = await call_with_retries(
        call, policy, sleep=clock.sleep, clock=clock.time, rng=lambda: 1.0
    )  # type: ignore[arg-type]
    assert out == "ok" and len(calls) == 4
    assert clock.sleeps == [1.25, 2.5, 5.0]  # nominal 1, 2, 4 at the top of the jitter band
    clock2 = Clock()
    calls, call = failing([error_for_status(500, "x", provider="p") for _ in range(2)])
    await call_with_retries(call, policy, sleep=clock2.sleep, clock=clock2.time, rng=lambda: 0.0)  # type: ignore[arg-type]
    assert clock2.sleeps == [0.75, 1.5]


async def test_retry_after_is_honoured() -> None:
    clock = Clock()
    calls, call = failing([error_for_status(429, "x", provider="p", retry_after=7.0)])
    await call_with_retries(call, RetryPolicy(), sleep=clock.sleep, clock=clock.time)  # type: ignore[arg-type]
    assert clock.sleeps == [7.0]


async def test_non_retryable_errors_and_exhaustion_raise_the_last_error() -> None:
    clock = Clock()
    calls, call = failing([error_for_status(401, "bad key", provider="p")])
    with pytest.raises(AuthenticationFailed):
        await call_with_retries(call, RetryPolicy(), sleep=clock.sleep, clock=clock.time)  # type: ignore[arg-type]
    assert len(calls) == 1 and clock.sleeps == []
    calls, call = failing([error_for_status(500, "x", provider="p") for _ in range(9)])
    with pytest.raises(ServerError):
        await call_with_retries(
            call, RetryPolicy(max_attempts=3), sleep=clock.sleep, clock=clock.time
        )  # type: ignore[arg-type]
    assert len(calls) == 3


async def test_budget_and_long_retry_after_stop_retries() -> None:
    clock = Clock()
    calls, call = failing([error_for_status(429, "x", provider="p", retry_after=600)])
    with pytest.raises(RateLimited):
        await call_with_retries(
            call, RetryPolicy(max_delay=30), sleep=clock.sleep, clock=clock.time
        )  # type: ignore[arg-type]
    assert clock.sleeps == []
    calls, call = failing([error_for_status(500, "x", provider="p") for _ in range(9)])
    policy = RetryPolicy(max_attempts=9, initial_delay=4, jitter=0, budget=10)
    with pytest.raises(ServerError):
        await call_with_retries(call, policy, sleep=clock.sleep, clock=clock.time)  # type: ignore[arg-type]
    assert clock.sleeps == [4.0]  # the next wait (8 s) would pass the 10 s budget


async def test_cancellation_is_never_retried() -> None:
    started = asyncio.Event()

    async def call() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.create_task(call_with_retries(call, RetryPolicy()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_other_errors_pass_through_and_any_awaitable_maker_is_called() -> None:
    clock = Clock()
    calls, call = failing([ValueError("not a provider error")])
    with pytest.raises(ValueError, match="not a provider error"):
        await call_with_retries(call, RetryPolicy(), sleep=clock.sleep, clock=clock.time)  # type: ignore[arg-type]
    assert len(calls) == 1 and clock.sleeps == []
    # A plain function that returns an awaitable (not a coroutine function) is awaited too.
    calls, call = failing([error_for_status(503, "x", provider="p")], result="made")
    out = await call_with_retries(
        lambda: call(),  # type: ignore[operator]
        RetryPolicy(jitter=0.0),
        sleep=clock.sleep,
        clock=clock.time,
    )
    assert out == "made" and len(calls) == 2 and clock.sleeps == [0.5]


def test_retry_policy_rejects_nonsense() -> None:
    with pytest.raises(sr.UsageError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(sr.UsageError):
        RetryPolicy(jitter=2)


def test_model_specs_resolve_through_the_registry() -> None:
    made: list[tuple[str, dict[str, object]]] = []

    def factory(model: str, **options: object) -> ScriptedModel:
        made.append((model, options))
        return ScriptedModel([text("hi")])

    register_provider("fake", factory)
    check_model_spec("fake:m1")
    client = resolve_model("fake:m1", temperature=0)
    assert isinstance(client, ScriptedModel) and made == [("m1", {"temperature": 0})]
    scripted = ScriptedModel([])
    assert resolve_model(scripted) is scripted
    with pytest.raises(sr.UsageError, match="provider:model"):
        check_model_spec("nocolon")
    with pytest.raises(sr.UsageError, match="unknown model provider"):
        check_model_spec("nope:x")
    with pytest.raises(sr.UsageError):
        register_provider("a:b", factory)
    with pytest.raises(sr.UsageError, match="ModelClient"):
        resolve_model(42)  # type: ignore[arg-type]


async def test_an_agent_named_by_string_creates_its_client_on_first_use() -> None:
    made: list[str] = []

    def factory(model: str, **options: object) -> ScriptedModel:
        made.append(model)
        return ScriptedModel([text(f"I am {model}")])

    register_provider("lazy", factory)
    agent = sr.Agent(name="a", model="lazy:m2")
    assert made == []  # no client (and no API key) needed to define the agent
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="who?")
    assert result.text == "I am m2" and made == ["m2"]


def test_provider_error_is_a_model_error() -> None:
    assert issubclass(ProviderError, sr.ModelError)
