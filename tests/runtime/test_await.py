"""Suspending for an external result, settling it, resuming."""

from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun.control import AwaitExternal, await_external
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool(side_effects=True)
async def wire_transfer(amount: int) -> str:
    """Ask the bank to wire money; the bank answers later."""
    await_external({"amount": amount, "queue": "bank"})


@sr.tool(concurrency_key="")
def note(text: str) -> str:
    """Take a note."""
    return "noted"


def agent(model: ScriptedModel) -> sr.Agent:
    return sr.Agent(name="payments", model=model, tools=[wire_transfer, note])


async def test_await_suspends_after_the_batch_and_resumes_with_the_result() -> None:
    store = sr.MemoryStore()
    model = ScriptedModel(
        [tool_calls(("wire_transfer", {"amount": 50}), ("note", {"text": "x"})), text("Wired.")]
    )
    runtime = sr.Runtime(store)
    result = await runtime.run(agent(model), run_id="p", input="pay 50")
    assert result.status == "suspended"
    wire = result.call("m1.c1")
    assert (wire.status, wire.handover, wire.payload) == (
        "waiting",
        "await",
        {"amount": 50, "queue": "bank"},
    )
    assert result.call("m1.c2").status == "succeeded"  # the rest of the batch ran
    assert len(model.requests) == 1

    pending = await runtime.pending("p")
    assert [(p.kind, p.call_id, p.name) for p in pending] == [("result", "m1.c1", "wire_transfer")]

    # Resuming before the host answered stays suspended and asks the model nothing.
    assert (await runtime.resume("p")).status == "suspended"
    assert len(model.requests) == 1

    # A new runtime (another process) settles and resumes.
    later = sr.Runtime(store, agents=[agent(model)])
    await later.settle("p", "m1.c1", result="wire #991 confirmed")
    done = await later.resume("p")
    assert done.status == "completed" and done.text == "Wired."
    tool_msg = model.requests[1].messages[-1]
    assert [p.content for p in tool_msg.parts] == ["wire #991 confirmed", "noted"]  # type: ignore[union-attr]
    assert await later.pending("p") == []


async def test_settle_with_an_error_reaches_the_model_as_an_error() -> None:
    model = ScriptedModel([tool_calls(("wire_transfer", {"amount": 5})), text("Sorry.")])
    runtime = sr.Runtime(sr.MemoryStore())
    await runtime.run(agent(model), run_id="p", input="pay")
    await runtime.settle("p", "m1.c1", error="insufficient funds")
    await runtime.resume("p")
    part = model.requests[1].messages[-1].parts[0]
    assert part.is_error and part.content == "insufficient funds"  # type: ignore[union-attr]


async def test_settle_rejects_bad_input_and_changes_nothing() -> None:
    model = ScriptedModel([tool_calls(("wire_transfer", {"amount": 5}), ("note", {"text": "x"}))])
    store = sr.MemoryStore()
    runtime = sr.Runtime(store)
    await runtime.run(agent(model), run_id="p", input="pay")
    with pytest.raises(sr.UsageError, match="exactly one"):
        await runtime.settle("p", "m1.c1")
    with pytest.raises(sr.UsageError, match="exactly one"):
        await runtime.settle("p", "m1.c1", result="a", error="b")
    with pytest.raises(sr.UsageError, match="no call 'nope'"):
        await runtime.settle("p", "nope", result="a")
    with pytest.raises(sr.RunNotFoundError):
        await runtime.settle("other", "m1.c1", result="a")
    with pytest.raises(sr.ConflictError, match="final"):
        await runtime.settle("p", "m1.c2", result="a")  # a call the runtime settled
    await runtime.settle("p", "m1.c1", result="ok")
    await runtime.settle("p", "m1.c1", result="ok")  # the same again: no change
    with pytest.raises(sr.ConflictError, match="final"):
        await runtime.settle("p", "m1.c1", result="again")  # a different, late answer
    snap = await store.load("p")
    assert snap is not None
    assert {c.id: c.result for c in snap.calls} == {"m1.c1": "ok", "m1.c2": "noted"}


def test_control_signals_are_not_errors_and_pickle() -> None:
    import pickle

    signal = AwaitExternal({"a": 1})
    assert not isinstance(signal, sr.SteadyrunError)
    again = pickle.loads(pickle.dumps(signal))
    assert again.payload == {"a": 1}


async def test_an_await_payload_that_cannot_be_stored_fails_the_call_not_the_run() -> None:
    @sr.tool
    async def bad() -> str:
        """Hands over something unstorable."""
        await_external({"socket": object()})

    model = ScriptedModel([tool_calls(("bad", {})), text("Could not hand it over.")])
    result = await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=model, tools=[bad]), run_id="r", input="x"
    )
    assert result.status == "completed"
    assert result.calls[0].status == "failed"
    assert "cannot be stored" in (result.calls[0].error or "")
