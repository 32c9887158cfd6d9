"""Memory: recalled memories reach the model and survive a crash; extraction changes the bank."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.extensions import SubAgents
from steadyrun.extensions.memory import (
    ExtractionResult,
    InMemoryMemoryBank,
    Memory,
    MemoryChanges,
    SqliteMemoryBank,
)
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def seeded(**namespaces: list[str]) -> InMemoryMemoryBank:
    bank = InMemoryMemoryBank()
    for ns, texts in namespaces.items():
        for t in texts:
            await bank.add(ns, t)
    return bank


def agent(model: sr.ModelClient, memory: Memory, *tools: sr.Tool) -> sr.Agent:
    return sr.Agent(
        name="helper",
        instructions="Help the user.",
        model=model,
        tools=list(tools),
        extensions=[memory],
    )


def changes(*ops: dict[str, Any]) -> sr.ModelResponse:
    """The answer to the extraction's structured call."""
    return tool_calls(("final_result", {"changes": list(ops)}))


def is_extraction(request: sr.ModelRequest) -> bool:
    return any(t.name == "final_result" for t in request.tools)


# -- recall --------------------------------------------------------------------------------------


async def test_recalled_memories_are_shown_to_the_model() -> None:
    bank = await seeded(
        default=["The user's dog is called Rex", "The user likes jazz", "The user is a nurse"]
    )
    model = ScriptedModel([text("Your dog is Rex.")])
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, Memory(bank, extract=False)), run_id="r", input="What's my dog called?"
    )
    assert result.status == "completed"
    instructions = model.requests[0].instructions
    assert instructions.startswith("Help the user.")
    assert "Relevant memories" in instructions
    assert "- [mem1] The user's dog is called Rex" in instructions
    assert "jazz" not in instructions and "nurse" not in instructions


async def test_nothing_is_shown_when_nothing_is_relevant() -> None:
    bank = await seeded(default=["The user likes jazz"])
    model = ScriptedModel([text("Hi.")])
    await sr.Runtime(sr.MemoryStore()).run(
        agent(model, Memory(bank, extract=False)), run_id="r", input="Hello there"
    )
    assert model.requests[0].instructions == "Help the user."


async def test_the_namespace_may_depend_on_the_run() -> None:
    bank = await seeded(alice=["Alice's dog is called Rex"], bob=["Bob's dog is called Fido"])
    memory = Memory(bank, namespace=lambda run_id: run_id.split(":")[0], extract=False)
    store = sr.MemoryStore()
    for user, name in (("alice", "Rex"), ("bob", "Fido")):
        model = ScriptedModel([text("ok")])
        await sr.Runtime(store).run(agent(model, memory), run_id=f"{user}:1", input="my dog?")
        assert f"called {name}" in model.requests[0].instructions
        assert ("Rex" if name == "Fido" else "Fido") not in model.requests[0].instructions


async def test_a_resumed_run_sees_the_memories_it_recalled_before_the_crash() -> None:
    bank = await seeded(default=["The user's dog is called Rex", "The user likes jazz"])
    store = sr.MemoryStore()
    crashed = asyncio.Event()

    @sr.tool(replayable=True)
    async def look_up_vet() -> str:
        """Hangs until the process dies."""
        crashed.set()
        await hang()
        return ""

    first = ScriptedModel([tool_calls(("look_up_vet", {}))])
    a = agent(first, Memory(bank, extract=False), look_up_vet)
    await crash_when(sr.Runtime(store).run(a, run_id="r", input="Book a vet for my dog"), crashed)
    # The bank changes while the run is down: the resumed turn still shows what it recalled.
    await bank.delete("default", "mem1")
    await bank.add("default", "The user's dog Rex needs a vet every May")

    second = ScriptedModel([text("Booked.")])
    result = await sr.Runtime(store, agents=[replace(a, model=second)]).resume("r")
    assert result.status == "completed"
    assert "[mem1] The user's dog is called Rex" in first.requests[0].instructions
    assert second.requests[0].instructions == first.requests[0].instructions

    # A new turn recalls afresh.
    third = ScriptedModel([text("Rex again.")])
    await sr.Runtime(store).run(replace(a, model=third), run_id="r", input="my dog's vet?")
    assert "[mem3] The user's dog Rex needs a vet every May" in third.requests[0].instructions
    assert "[mem1]" not in third.requests[0].instructions


async def test_a_sub_agent_task_does_not_replace_the_recalled_memories() -> None:
    bank = await seeded(default=["The user's dog is called Rex", "Weather reports bore the user"])

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if any(t.name == "delegate" for t in request.tools):
            if not any(m.role == "tool" for m in request.messages):
                return tool_calls(("delegate", {"task": "weather report for today"}))
            return text("main done")
        assert "Relevant memories" not in request.instructions  # sub-agents see none
        return text("sunny")

    model = FunctionModel(respond)
    a = sr.Agent(
        name="main",
        model=model,
        extensions=[Memory(bank, extract=False), SubAgents()],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(a, run_id="r", input="walk my dog?")
    assert result.text == "main done"
    main_requests = [r for r in model.requests if any(t.name == "delegate" for t in r.tools)]
    assert len(main_requests) == 2
    for request in main_requests:
        assert "[mem1] The user's dog is called Rex" in request.instructions
        assert "Weather" not in request.instructions


async def test_a_failing_search_is_logged_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(InMemoryMemoryBank):
        async def search(self, namespace: str, query: str, limit: int = 5) -> list[Any]:
            raise OSError("disk on fire")

    model = ScriptedModel([text("ok")])
    with caplog.at_level(logging.ERROR, "steadyrun.extensions.memory"):
        result = await sr.Runtime(sr.MemoryStore()).run(
            agent(model, Memory(Broken(), extract=False)), run_id="r", input="hi"
        )
    assert result.status == "completed"
    assert "memory recall failed" in caplog.text


# -- extraction ----------------------------------------------------------------------------------


async def test_extraction_adds_updates_and_deletes_memories_and_counts_its_usage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bank = await seeded(default=["The user's dog is called Rex", "The user lives in Lisbon"])

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_extraction(request):
            return changes(
                {"op": "add", "text": "The user is vegetarian"},
                {"op": "update", "id": "mem2", "text": "The user lives in Porto"},
                {"op": "delete", "id": "mem1"},
                {"op": "delete", "id": "mem99"},
                {"op": "update", "id": "mem42", "text": "made up"},
                {"op": "add", "text": "the user is  VEGETARIAN"},
                {"op": "add"},
            )
        return text("Noted: Porto, and no meat.")

    model = FunctionModel(respond)
    with caplog.at_level(logging.INFO, "steadyrun.extensions.memory"):
        result = await sr.Runtime(sr.MemoryStore()).run(
            agent(model, Memory(bank)),
            run_id="r",
            input="I moved to Porto, I don't eat meat, and I never had a dog.",
        )
    assert result.status == "completed"
    assert [(m.id, m.text) for m in await bank.list("default")] == [
        ("mem2", "The user lives in Porto"),
        ("mem3", "The user is vegetarian"),
    ]
    assert (await bank.get("default", "mem3")).metadata == {"run_id": "r"}  # type: ignore[union-attr]
    # The extraction saw the existing memories and the conversation.
    extraction = model.requests[-1]
    assert is_extraction(extraction)
    prompt = extraction.messages[0].text
    assert "- [mem1] The user's dog is called Rex" in prompt
    assert "user: I moved to Porto" in prompt
    assert "assistant: Noted: Porto, and no meat." in prompt
    # Its usage is part of the run's.
    assert result.usage.requests == 2
    assert result.usage.input_tokens == 20
    for reason in ("unknown id 'mem99'", "unknown id 'mem42'", "already remembered", "no text"):
        assert reason in caplog.text


async def test_a_failing_extraction_never_fails_the_run(caplog: pytest.LogCaptureFixture) -> None:
    bank = await seeded(default=[])

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if is_extraction(request):
            return tool_calls(("final_result", {"changes": [{"op": "explode"}]}))
        return text("ok")

    model = FunctionModel(respond)
    with caplog.at_level(logging.ERROR, "steadyrun.extensions.memory"):
        result = await sr.Runtime(sr.MemoryStore()).run(
            agent(model, Memory(bank)), run_id="r", input="I like tea"
        )
    assert result.status == "completed"
    assert "memory extraction failed" in caplog.text
    assert result.usage.requests == 4  # the turn's call and three extraction attempts
    assert await bank.list("default") == []


async def test_each_extraction_reads_the_turns_since_the_last_one() -> None:
    bank = await seeded(default=[])
    prompts: list[str] = []

    def extract(request: sr.ModelRequest) -> sr.ModelResponse:
        prompts.append(request.messages[0].text)
        return changes({"op": "add", "text": f"fact {len(prompts)}"})

    extractor = FunctionModel(extract)
    memory = Memory(bank, extract_model=extractor)
    model = ScriptedModel([text("first answer"), text("second answer")])
    runtime, a = sr.Runtime(sr.MemoryStore()), agent(model, memory)
    await runtime.run(a, run_id="r", input="first question")
    result = await runtime.run(a, run_id="r", input="second question")
    assert not any(is_extraction(r) for r in model.requests)  # the agent's model is not asked
    assert len(prompts) == 2
    assert "first question" in prompts[0]
    assert "second question" in prompts[1] and "first question" not in prompts[1]
    assert "- [mem1] fact 1" in prompts[1]
    assert [m.text for m in await bank.list("default")] == ["fact 1", "fact 2"]
    assert result.usage.requests == 4


async def test_extract_can_be_called_directly(tmp_path: Path) -> None:
    async with SqliteMemoryBank(tmp_path / "m.db") as bank:
        extractor = ScriptedModel(
            [changes({"op": "add", "text": "The user's dog is called Rex"}), changes()]
        )
        memory = Memory(bank, extract_model=extractor)
        convo = [sr.Message.user("My dog is Rex."), sr.Message.user("Remember that.")]
        out = await memory.extract(convo, namespace="alice")
        assert isinstance(out, ExtractionResult)
        assert [m.text for m in out.added] == ["The user's dog is called Rex"]
        assert out.usage.requests == 1
        assert (await memory.extract(convo, namespace="alice")).added == []
        assert memory.take_usage().requests == 2
        assert memory.take_usage() == sr.Usage()
        assert await memory.extract([], namespace="alice") == ExtractionResult()
        with pytest.raises(sr.UsageError, match="needs extract_model"):
            await Memory(bank).extract(convo)
        with pytest.raises(sr.UsageError, match="needs a namespace"):
            await Memory(bank, namespace=str.upper, extract_model=extractor).extract(convo)
    schema = MemoryChanges.model_json_schema()
    assert schema["type"] == "object"


# -- tools ---------------------------------------------------------------------------------------


async def test_the_model_may_remember_and_forget() -> None:
    bank = await seeded(default=["The user's cat is called Tom"])
    model = ScriptedModel(
        [
            tool_calls(
                ("remember", {"text": "The user's dog is called Rex"}),
                ("forget", {"memory_id": "mem1"}),
            ),
            tool_calls(
                ("remember", {"text": "the user's dog is called rex"}),
                ("forget", {"memory_id": "mem1"}),
            ),
            text("done"),
        ]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(
        agent(model, Memory(bank, tools=True, extract=False)), run_id="r", input="my cat Tom?"
    )
    assert [c.result for c in result.calls] == [
        "remembered as mem2",
        "forgot mem1",
        "already remembered as mem2",
        "no memory mem1 (already forgotten?)",
    ]
    assert "remember(text)" in model.requests[0].instructions
    assert "[mem1] The user's cat is called Tom" in model.requests[0].instructions
    assert [m.text for m in await bank.list("default")] == ["The user's dog is called Rex"]


def test_tools_are_opt_in_and_settings_are_checked() -> None:
    bank = InMemoryMemoryBank()
    assert Memory(bank).tools() == ()
    assert [t.name for t in Memory(bank, tools=True).tools()] == ["remember", "forget"]
    with pytest.raises(sr.UsageError):
        Memory(bank, recall_limit=-1)
    state = {"recalled": [{"id": "mem1", "text": "x"}], "extracted_through": 3}
    memory = Memory(bank).for_run()
    memory.restore_state(json.loads(json.dumps(state)))
    assert memory.save_state() == state and memory.recalled == [("mem1", "x")]


# -- the example ---------------------------------------------------------------------------------


def test_the_memory_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "memory_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "remembered: The user's dog is called Rex" in out.stdout
    assert "Your dog is called Rex." in out.stdout
