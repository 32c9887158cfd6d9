"""Input that arrives while a run works: taken after the batch, once, in order."""

from __future__ import annotations

import steadyrun as sr
from steadyrun.testing import ScriptedModel, text, tool_calls


def user_texts(request: sr.ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]


async def test_steering_mid_batch_is_seen_by_the_next_model_call_exactly_once() -> None:
    runtime: sr.Runtime
    ran: list[str] = []

    @sr.tool(concurrency_key="")
    async def work(name: str) -> str:
        """Work."""
        ran.append(name)
        if name == "w1":
            # Sent twice with the same id (a client retry): it must enter the history once.
            await runtime.send("r", "Actually, use express shipping.", id="steer-1")
            await runtime.send("r", "Actually, use express shipping.", id="steer-1")
            await runtime.send("r", "And gift wrap it.", id="steer-2")
        return name

    model = ScriptedModel([tool_calls(("work", {"name": "w1"})), text("ok"), text("unused")])
    runtime = sr.Runtime(sr.MemoryStore())
    result = await runtime.run(
        sr.Agent(name="a", model=model, tools=[work]), run_id="r", input="Ship it."
    )
    assert result.status == "completed"
    second = model.requests[1]
    assert user_texts(second) == [
        "Ship it.",
        "Actually, use express shipping.",
        "And gift wrap it.",
    ]
    # The steering sits after the batch's results, before the next model call.
    assert [m.role for m in second.messages] == ["user", "assistant", "tool", "user", "user"]
    assert len(model.requests) == 2


async def test_calls_that_never_started_are_cancelled_when_input_arrives() -> None:
    runtime: sr.Runtime
    ran: list[str] = []

    @sr.tool
    async def step(name: str) -> str:
        """A step that runs alone."""
        ran.append(name)
        if name == "s1":
            await runtime.send("r", "Stop, wrong address!", id="stop")
        return name

    model = ScriptedModel(
        [
            tool_calls(
                ("step", {"name": "s1"}), ("step", {"name": "s2"}), ("step", {"name": "s3"})
            ),
            text("Stopped."),
        ]
    )
    runtime = sr.Runtime(sr.MemoryStore())
    result = await runtime.run(
        sr.Agent(name="a", model=model, tools=[step]), run_id="r", input="go"
    )
    assert ran == ["s1"]
    assert [c.status for c in result.calls] == ["succeeded", "cancelled", "cancelled"]
    assert "cancelled before it started" in (result.calls[1].result or "")
    second = model.requests[1].messages
    assert second[-1].text == "Stop, wrong address!"
    assert [p.is_error for p in second[-2].parts] == [False, True, True]  # type: ignore[union-attr]


async def test_input_arriving_with_the_final_text_supersedes_it() -> None:
    runtime: sr.Runtime

    async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if len(request.messages) == 1:
            await runtime.send("r", "one more thing", id="late")
            return text("first answer")
        return text("answer to both")

    from steadyrun.testing import FunctionModel

    model = FunctionModel(respond)
    runtime = sr.Runtime(sr.MemoryStore())
    result = await runtime.run(sr.Agent(name="a", model=model), run_id="r", input="q")
    assert result.text == "answer to both"
    assert [m.text for m in model.requests[1].messages] == ["q", "first answer", "one more thing"]


async def test_a_new_revision_of_a_message_enters_again() -> None:
    model = ScriptedModel([text("a"), text("b")])
    runtime = sr.Runtime(sr.MemoryStore())
    agent = sr.Agent(name="a", model=model)
    await runtime.run(agent, run_id="r", input="draft", input_id="m1")
    await runtime.send("r", "draft, edited", id="m1", revision="2")
    result = await runtime.resume("r")
    assert result.text == "b"
    assert [m.text for m in model.requests[1].messages] == ["draft", "a", "draft, edited"]


async def test_input_messages_keep_their_media_references() -> None:
    from steadyrun.chat import MediaPart, MediaRef, TextPart

    ref = MediaRef(key="uploads/receipt.png", mime="image/png", size=1234, sha256="ab" * 32)
    message = sr.Message(
        role="user", parts=[TextPart(text="See the receipt"), MediaPart(ref=ref)], id="u1"
    )
    model = ScriptedModel([text("Thanks")])
    result = await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=model), run_id="r", input=message
    )
    sent = model.requests[0].messages[0]
    assert sent.text == "See the receipt" and sent.id == "u1"
    assert [p.ref for p in sent.parts if isinstance(p, MediaPart)] == [ref]
    assert result.messages[0] == sent
