from __future__ import annotations

import asyncio

import pytest

import steadyrun as sr
from steadyrun.testing import ScriptedModel, text


def test_public_names_are_pinned() -> None:
    assert sorted(sr.__all__) == sorted(
        [
            "HandoverPending",
            "ModelCallSettled",
            "ModelCallStarted",
            "RunCompleted",
            "RunEvent",
            "RunFailed",
            "RunStarted",
            "RunStream",
            "RunSuspended",
            "TextDelta",
            "ThinkingDelta",
            "ToolArgumentsDelta",
            "ToolCallSettled",
            "ToolCallStarted",
            "UsageReported",
            "Accept",
            "Agent",
            "Budget",
            "BudgetExceeded",
            "CallNotFoundError",
            "CallRecord",
            "ConflictError",
            "ContentFiltered",
            "ContextPolicy",
            "Correct",
            "Finish",
            "Guard",
            "GuardView",
            "CorrectionsExhausted",
            "EngineUnavailableError",
            "ForeignEngineError",
            "FormatVersionError",
            "InvalidModelOutput",
            "InvalidResponseError",
            "IterationLimitExceeded",
            "LimitExceeded",
            "Limits",
            "MemoryStore",
            "Message",
            "ModelCallFailed",
            "ModelClient",
            "ModelError",
            "NotPendingError",
            "ModelRequest",
            "ModelResponse",
            "Observer",
            "PendingItem",
            "Price",
            "RunBusyError",
            "RunCancelledError",
            "RunFailure",
            "RunNotFoundError",
            "RunResult",
            "Runtime",
            "ScriptExhaustedError",
            "SqliteStore",
            "SteadyrunError",
            "StructuredOutputError",
            "StoreError",
            "SubAgentInterrupted",
            "Texts",
            "Tool",
            "ToolArgumentsError",
            "ToolContext",
            "ToolDefinitionError",
            "TurnLimitExceeded",
            "Usage",
            "UnknownCallError",
            "UsageError",
            "__version__",
            "generate_object",
            "run_sync",
            "tool",
        ]
    )
    for name in sr.__all__:
        assert getattr(sr, name) is not None
        if name != "__version__":
            assert getattr(sr, name).__doc__, f"{name} has no docstring"


def test_error_tree() -> None:
    for err in (sr.UsageError, sr.StoreError, sr.ModelError, sr.RunFailure):
        assert issubclass(err, sr.SteadyrunError)
    assert issubclass(sr.ToolDefinitionError, sr.UsageError)
    assert issubclass(sr.FormatVersionError, sr.StoreError)
    assert issubclass(sr.IterationLimitExceeded, sr.LimitExceeded)
    assert issubclass(sr.ScriptExhaustedError, sr.ModelError)


def test_run_sync_runs_a_coroutine() -> None:
    model = ScriptedModel([text("hi")])
    result = sr.run_sync(
        sr.Runtime(sr.MemoryStore()).run(sr.Agent(name="a", model=model), run_id="r", input="x")
    )
    assert result.text == "hi"


async def test_run_sync_refuses_inside_a_running_loop() -> None:
    async def nothing() -> int:
        return 1

    with pytest.raises(sr.UsageError, match="running event loop"):
        sr.run_sync(nothing())
    with pytest.raises(sr.UsageError, match="coroutine"):
        sr.run_sync(1)  # type: ignore[arg-type]


def test_agent_and_limits_report_misuse() -> None:
    with pytest.raises(sr.UsageError, match="provider:model"):
        sr.Agent(name="a", model="gpt-4.1")
    with pytest.raises(sr.UsageError, match="unknown model provider"):
        sr.Agent(name="a", model="acme:large")
    with pytest.raises(sr.UsageError, match="ModelClient"):
        sr.Agent(name="a", model=object())  # type: ignore[arg-type]
    with pytest.raises(sr.UsageError, match="non-empty name"):
        sr.Agent(name="", model=ScriptedModel([]))
    with pytest.raises(sr.UsageError) as exc:
        sr.Limits(max_iterations=0, max_concurrent_tool_calls=0, corrections=-1)
    assert "max_iterations" in str(exc.value) and "corrections" in str(exc.value)

    @sr.tool(name="same")
    def one() -> str:
        """One."""
        return "1"

    @sr.tool(name="same")
    def two() -> str:
        """Two."""
        return "2"

    with pytest.raises(sr.UsageError, match="same"):
        sr.Agent(name="a", model=ScriptedModel([]), tools=[one, two])


async def test_runtime_reports_misuse() -> None:
    runtime = sr.Runtime(sr.MemoryStore())
    agent = sr.Agent(name="a", model=ScriptedModel([text("hi")]))
    with pytest.raises(sr.UsageError, match="needs input"):
        await runtime.run(agent, run_id="r")
    with pytest.raises(sr.RunNotFoundError):
        await runtime.resume("missing")
    with pytest.raises(sr.RunNotFoundError):
        await runtime.pending("missing")
    await runtime.run(agent, run_id="r", input="x")
    other = sr.Agent(name="b", model=ScriptedModel([]))
    with pytest.raises(sr.UsageError, match="belongs to agent 'a'"):
        await runtime.run(other, run_id="r", input="y")
    with pytest.raises(sr.UsageError, match="two different agents"):
        await runtime.run(sr.Agent(name="a", model=ScriptedModel([])), run_id="q", input="y")
    stranger = sr.Runtime(runtime.store)
    with pytest.raises(sr.UsageError, match="does not know"):
        await stranger.resume("r")
    with pytest.raises(sr.UsageError, match="str or a Message"):
        await runtime.send("r", 42)  # type: ignore[arg-type]


async def test_one_run_executes_once_at_a_time_in_a_runtime() -> None:
    gate = asyncio.Event()

    async def slow(request: sr.ModelRequest) -> sr.ModelResponse:
        await gate.wait()
        return text("hi")

    from steadyrun.testing import FunctionModel

    runtime = sr.Runtime(sr.MemoryStore())
    agent = sr.Agent(name="a", model=FunctionModel(slow))
    first = asyncio.create_task(runtime.run(agent, run_id="r", input="x"))
    for _ in range(1000):  # let the run start and save its first step
        if await runtime.store.load("r"):
            break
        await asyncio.sleep(0)
    with pytest.raises(sr.UsageError, match="already executing"):
        await runtime.resume("r")
    gate.set()
    assert (await first).text == "hi"


async def test_many_runs_share_one_runtime_concurrently() -> None:
    runtime = sr.Runtime(sr.MemoryStore())
    agents = [sr.Agent(name=f"a{i}", model=ScriptedModel([text(f"hi {i}")])) for i in range(20)]
    results = await asyncio.gather(
        *[runtime.run(a, run_id=f"r{i}", input="x") for i, a in enumerate(agents)]
    )
    assert [r.text for r in results] == [f"hi {i}" for i in range(20)]


def test_postgres_store_is_public_but_optional() -> None:
    # Reachable as sr.PostgresStore, yet not in __all__: `import *` works without psycopg.
    assert "PostgresStore" not in sr.__all__
    assert "PostgresStore" in dir(sr)
    assert sr.PostgresStore.__doc__
    namespace: dict[str, object] = {}
    exec("from steadyrun import *", namespace)
    assert "Runtime" in namespace


def test_postgres_leases_are_exported_beside_the_postgres_store() -> None:
    # docs/worker.md builds them by name; like PostgresStore, loaded on first use (psycopg).
    from steadyrun import stores
    from steadyrun.stores import PostgresLeases
    from steadyrun.stores._leases_postgres import PostgresLeases as defined

    assert PostgresLeases is defined and PostgresLeases.__doc__
    assert "PostgresLeases" in dir(stores) and "PostgresLeases" not in stores.__all__
