"""A HostFailure's message stays on the record; the host chooses whether the model sees it."""

from __future__ import annotations

import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.control import HostFailure
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls

MESSAGE = "gateway 10.0.0.7 dropped the connection"
EN = sr.Texts()


@sr.tool(side_effects=True)
def wire(amount: int) -> str:
    """Wire money; the bank's gateway may fail without saying whether it sent it.

    Args:
        amount: How much.
    """
    raise HostFailure(MESSAGE)


def seen(model: ScriptedModel) -> ToolResultPart:
    part = model.requests[1].messages[-1].parts[0]
    assert isinstance(part, ToolResultPart)
    return part


async def test_the_message_is_kept_on_the_record_and_shown_by_default(store: Store) -> None:
    model = ScriptedModel([tool_calls(("wire", {"amount": 5})), text("Checked.")])
    agent = sr.Agent(name="ops", model=model, tools=[wire])
    result = await sr.Runtime(store).run(agent, run_id="r", input="x")
    assert result.status == "completed"
    call = result.call("m1.c1")
    assert (call.status, call.error) == ("needs_review", MESSAGE)
    stored = await store.load_call("r", "m1.c1")
    assert stored is not None and stored.error == MESSAGE
    part = seen(model)
    assert part.is_error and MESSAGE in part.content
    assert "may or may not have taken effect" in part.content  # not the bare message


async def test_the_host_may_keep_the_message_from_the_model(store: Store) -> None:
    model = ScriptedModel([tool_calls(("wire", {"amount": 5})), text("Checked.")])
    agent = sr.Agent(name="ops", model=model, tools=[wire])
    runtime = sr.Runtime(store, host_failure_details=False)
    result = await runtime.run(agent, run_id="r", input="x")
    assert result.call("m1.c1").error == MESSAGE
    part = seen(model)
    assert MESSAGE not in part.content
    assert EN.tool_host_failure_hidden.format(name="wire") in part.content
    assert "may or may not have taken effect" in part.content
