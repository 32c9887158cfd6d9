"""Completion tools, the completion validator, guards, and one shared correction budget."""

from __future__ import annotations

from typing import Any

import pytest

import steadyrun as sr
from steadyrun.control import complete
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls


@sr.tool(completion=True)
def submit_answer(category: str, confidence: float) -> dict[str, Any]:
    """Give the final classification.

    Args:
        category: One of billing, shipping, other.
        confidence: 0 to 1.
    """
    return {"category": category, "confidence": confidence}


@sr.tool(completion=True)
def escalate(reason: str) -> str:
    """Hand the ticket to a human for good (fixed: new input does not reopen it)."""
    complete({"escalated": reason}, fixed=True)


@sr.tool(concurrency_key="")
def lookup(order_id: str) -> str:
    """Look up an order."""
    return "shipped"


def agent(model: ScriptedModel, **kw: Any) -> sr.Agent:
    return sr.Agent(name="triage", model=model, tools=[submit_answer, escalate, lookup], **kw)


def answer(category: str, confidence: float = 0.9) -> sr.ModelResponse:
    return tool_calls(("submit_answer", {"category": category, "confidence": confidence}))


async def test_a_completion_tool_ends_the_run_with_its_value(store: Store) -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": "1"})), answer("shipping")])
    result = await sr.Runtime(store).run(agent(model), run_id="r", input="where is it?")
    assert result.status == "completed"
    assert result.completion == {"category": "shipping", "confidence": 0.9}
    assert result.completion_reason is None
    model.assert_complete()


async def test_a_completion_with_other_calls_gets_a_correction(store: Store) -> None:
    model = ScriptedModel(
        [
            tool_calls(
                ("lookup", {"order_id": "1"}),
                ("submit_answer", {"category": "billing", "confidence": 1}),
            ),
            answer("billing"),
        ]
    )
    result = await sr.Runtime(store).run(agent(model), run_id="r", input="x")
    assert result.completion == {"category": "billing", "confidence": 0.9}
    first = [result.call("m1.c1"), result.call("m1.c2")]
    assert [c.status for c in first] == ["failed", "failed"]
    assert all("must be called alone" in (c.error or "") for c in first)
    assert all(c.started_at is None for c in first)  # nothing ran


async def test_the_validator_rejects_with_feedback_then_accepts(store: Store) -> None:
    def confident(value: dict[str, Any]) -> str | None:
        return None if value["confidence"] >= 0.5 else "confidence below 0.5: look closer"

    model = ScriptedModel([answer("other", 0.2), answer("billing", 0.8)])
    result = await sr.Runtime(store).run(
        agent(model, completion_validator=confident), run_id="r", input="x"
    )
    assert result.completion == {"category": "billing", "confidence": 0.8}
    rejected = result.call("m1.c1")
    assert rejected.status == "failed" and "look closer" in (rejected.error or "")
    part = model.requests[1].messages[-1].parts[0]
    assert part.is_error and "not accepted" in part.content  # type: ignore[union-attr]


async def test_spent_corrections_give_the_fallback_completion_with_its_reason(
    store: Store,
) -> None:
    model = ScriptedModel([answer("x", 0.1), answer("x", 0.1)])
    result = await sr.Runtime(store).run(
        agent(
            model,
            completion_validator=lambda v: "too unsure",
            completion_fallback=lambda reason: {"category": "other", "why": reason},
            limits=sr.Limits(corrections=1),
        ),
        run_id="r",
        input="x",
    )
    assert result.status == "completed"
    assert result.completion == {"category": "other", "why": "corrections_exhausted"}
    assert result.completion_reason == "corrections_exhausted"


async def test_without_a_fallback_spent_corrections_fail_the_run(store: Store) -> None:
    model = ScriptedModel([answer("x", 0.1), answer("x", 0.1)])
    result = await sr.Runtime(store).run(
        agent(model, completion_validator=lambda v: "no"), run_id="r", input="x"
    )
    assert result.status == "failed" and isinstance(result.error, sr.CorrectionsExhausted)


async def test_the_iteration_budget_ends_in_the_fallback(store: Store) -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": str(i)})) for i in range(3)])
    result = await sr.Runtime(store).run(
        agent(model, limits=sr.Limits(max_iterations=3), completion_fallback=lambda r: r),
        run_id="r",
        input="x",
    )
    assert (result.status, result.completion, result.completion_reason) == (
        "completed",
        "budget_exhausted",
        "budget_exhausted",
    )


async def test_a_non_fixed_completion_is_superseded_by_new_input(store: Store) -> None:
    runtime: sr.Runtime

    @sr.tool(completion=True)
    def done(category: str) -> str:
        """Finish."""
        return category

    async def late(request: sr.ModelRequest) -> sr.ModelResponse:
        return tool_calls(("done", {"category": "billing"}))

    model = ScriptedModel([late, answer("shipping")])

    @sr.tool(concurrency_key="")
    async def check(order_id: str) -> str:
        """Check, while the user writes again."""
        return "ok"

    class Sender(sr.Observer):
        # While the completion runs (its settle is announced once the run's next step is
        # saved, after the run has decided on it).
        async def on_tool_start(self, run_id: str, call: sr.CallRecord) -> None:
            if call.name == "done":
                await runtime.send("r", "Actually it's about shipping", id="u2")

    runtime = sr.Runtime(store, observers=[Sender()])
    result = await runtime.run(
        sr.Agent(name="t", model=model, tools=[done, submit_answer, check]), run_id="r", input="x"
    )
    assert result.completion == {"category": "shipping", "confidence": 0.9}
    assert model.requests[1].messages[-1].text == "Actually it's about shipping"


async def test_a_fixed_completion_ends_the_run_even_with_new_input(store: Store) -> None:
    runtime: sr.Runtime

    class Sender(sr.Observer):
        async def on_tool_start(self, run_id: str, call: sr.CallRecord) -> None:
            await runtime.send("r", "wait, one more thing", id="u2")

    model = ScriptedModel([tool_calls(("escalate", {"reason": "legal threat"}))])
    runtime = sr.Runtime(store, observers=[Sender()])
    result = await runtime.run(agent(model), run_id="r", input="x")
    assert result.status == "completed" and result.completion == {"escalated": "legal threat"}


class Politeness:
    """A guard: answers must not say 'calm down'; it finishes on 'ESCALATE'."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def review(self, view: sr.GuardView) -> sr.Accept | sr.Correct | sr.Finish:
        self.seen.append(view.text)
        if "calm down" in view.text:
            return sr.Correct(prompt="Never tell a customer to calm down. Answer again.")
        if view.text == "ESCALATE":
            return sr.Finish(value={"escalated": True})
        return sr.Accept()


async def test_a_guard_correction_reruns_the_turn_and_leaves_no_trace(store: Store) -> None:
    guard = Politeness()
    model = ScriptedModel([text("Please calm down."), text("I am sorry, let me fix this.")])
    runtime = sr.Runtime(store)
    result = await runtime.run(
        sr.Agent(name="g", model=model, guard=guard), run_id="r", input="This is the third time!"
    )
    assert result.text == "I am sorry, let me fix this."
    assert guard.seen == ["Please calm down.", "I am sorry, let me fix this."]
    retry = [m.text for m in model.requests[1].messages]
    assert retry == [
        "This is the third time!",
        "Please calm down.",
        "Never tell a customer to calm down. Answer again.",
    ]
    # Neither the rejected text nor the prompt is in the history the run keeps.
    assert [m.text for m in result.messages] == [
        "This is the third time!",
        "I am sorry, let me fix this.",
    ]
    follow = ScriptedModel([text("Anything else?")])
    again = await sr.Runtime(store).run(
        sr.Agent(name="g", model=follow, guard=guard), run_id="r", input="thanks", input_id="u2"
    )
    assert again.text == "Anything else?"
    assert "calm down" not in " ".join(m.text for m in follow.requests[0].messages)


async def test_a_guard_may_finish_the_run_or_run_out_of_corrections(store: Store) -> None:
    guard = Politeness()
    result = await sr.Runtime(store).run(
        sr.Agent(name="g", model=ScriptedModel([text("ESCALATE")]), guard=guard),
        run_id="r1",
        input="x",
    )
    assert result.completion == {"escalated": True}
    model = ScriptedModel([text("calm down"), text("calm down!")])
    spent = await sr.Runtime(store).run(
        sr.Agent(name="g", model=model, guard=guard, completion_fallback=lambda r: {"human": r}),
        run_id="r2",
        input="x",
    )
    assert spent.completion == {"human": "guard_rejected"}
    assert spent.completion_reason == "guard_rejected"


async def test_a_guard_that_raises_fails_the_run(store: Store) -> None:
    class Broken:
        def review(self, view: sr.GuardView) -> sr.Accept:
            raise RuntimeError("guard crashed")

    with pytest.raises(RuntimeError, match="guard crashed"):
        await sr.Runtime(store).run(
            sr.Agent(name="g", model=ScriptedModel([text("hi")]), guard=Broken()),
            run_id="r",
            input="x",
        )
