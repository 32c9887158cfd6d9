"""The finish reason of the response a run ended with is on its result; a cut answer may be
corrected (opt-in) instead of delivered."""

from __future__ import annotations

import steadyrun as sr
from steadyrun.chat import TextPart
from steadyrun.testing import ScriptedModel, text, tool_calls

EN = sr.Texts()
CUT = "The answer is forty-"


@sr.tool
def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return f"order {order_id}: shipped"


async def test_the_result_says_how_the_last_response_finished() -> None:
    model = ScriptedModel([tool_calls(("lookup", {"order_id": "7"})), text("Shipped.")])
    store = sr.MemoryStore()
    agent = sr.Agent(name="a", model=model, tools=[lookup])
    result = await sr.Runtime(store).run(agent, run_id="r", input="Where?")
    assert (result.status, result.finish_reason) == ("completed", "stop")
    # It is stored: a reload of the completed run says the same.
    again = await sr.Runtime(store, agents=[agent]).resume("r")
    assert again.finish_reason == "stop"


async def test_a_cut_answer_is_delivered_as_it_is_but_says_so() -> None:
    model = ScriptedModel([text(CUT, finish="length")])
    result = await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=model), run_id="r", input="What is six times seven?"
    )
    assert (result.status, result.text, result.finish_reason) == ("completed", CUT, "length")


async def test_with_the_opt_in_a_cut_answer_is_corrected_not_delivered() -> None:
    model = ScriptedModel([text(CUT, finish="length"), text("42.")])
    agent = sr.Agent(name="a", model=model, correct_length_cut=True)
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="6 x 7?")
    assert (result.status, result.text, result.finish_reason) == ("completed", "42.", "stop")
    second = model.requests[1].messages
    # The model sees its cut answer and the correction, once.
    assert [m.role for m in second[-2:]] == ["assistant", "user"]
    assert second[-2].text == CUT
    assert second[-1].parts == [TextPart(text=EN.length_cut_text)]
    assert sum(m.text == EN.length_cut_text for m in result.messages) == 1


async def test_a_cut_answer_after_the_corrections_are_spent_uses_the_fallback_or_fails() -> None:
    model = ScriptedModel([text(CUT, finish="length")])
    agent = sr.Agent(
        name="a", model=model, correct_length_cut=True, limits=sr.Limits(corrections=0)
    )
    failed = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="6 x 7?")
    assert failed.status == "failed" and isinstance(failed.error, sr.CorrectionsExhausted)
    assert failed.finish_reason == "length"

    model = ScriptedModel([text(CUT, finish="length")])
    agent = sr.Agent(
        name="b",
        model=model,
        correct_length_cut=True,
        limits=sr.Limits(corrections=0),
        completion_fallback=lambda reason: {"gave_up": reason},
    )
    done = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="6 x 7?")
    assert done.status == "completed" and done.completion == {"gave_up": "corrections_exhausted"}
