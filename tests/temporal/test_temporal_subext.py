"""Sub-agents on Temporal at parity with the built-in engine: forked skills, shared extensions.

A forked skill's ``load_skill`` runs as a child workflow (as a delegation does), and the child
workflow runs with the parent's extensions in the parent's state, whose states come back
(``steadyrun.temporal._subagents``). Each scenario runs on both engines with the same result.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import json  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import subext_kit as kit  # noqa: E402

import steadyrun as sr  # noqa: E402
from devserverkit import either_engine  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.extensions import Skills  # noqa: E402
from steadyrun.testing import FunctionModel, tool_calls  # noqa: E402

DATA = Path(__file__).parent / "data"


@pytest.fixture(params=["builtin", "temporal"])
def engine(request: pytest.FixtureRequest) -> Any:
    return either_engine(request, kit)


async def test_a_forked_skill_runs_its_sub_agent(engine: Any, tmp_path: Path) -> None:
    requests: list[ModelRequest] = []
    run_id = kit.fresh("fork")
    async with engine(kit.make_agent(requests, tmp_path, tally=False), tmp_path) as run:
        out = await run(run_id, "Read the report.")
    said = "digest of Read the report. ['list_skills', 'load_skill', 'read_skill_resource'] <>"
    assert (out.status, out.text) == ("completed", f"done: {said}")
    assert out.calls == [("m1.c1", "succeeded", said, None)]
    assert out.usage == 3  # two of the main agent's model calls, one of the fork's
    forks = [r for r in requests if "carrying out the skill" in r.instructions]
    assert len(forks) == 1
    assert forks[0].messages[0].text == "Read the report."
    # What the fork's model sees: the skill's preamble and body.
    assert "Digest the task in one line." in forks[0].instructions


async def test_a_forked_skill_without_a_task_is_refused(engine: Any, tmp_path: Path) -> None:
    async with engine(kit.make_agent([], tmp_path, tally=False), tmp_path) as run:
        out = await run(kit.fresh("notask"), "No task.")
    assert out.status == "completed"
    why = sr.Texts().skill_fork_needs_task.format(name="digest")
    refused = f"load_skill failed: ValueError: {why}"
    assert out.calls == [("m1.c1", "failed", None, refused)]
    assert out.text == f"done: {refused}"


async def test_a_history_of_a_fork_from_before_replays(tmp_path: Path) -> None:
    """Recorded with main 1ace2f3 (``subext_kit.record``): the fork's load ran in the tool
    activity (and failed there). Without the patch marker it still does, on replay."""
    from temporalio.client import WorkflowHistory

    from steadyrun.temporal import TemporalApp

    app = TemporalApp(agents=[kit.make_agent([], tmp_path, tally=False)], store=sr.MemoryStore())
    for run_id, text in json.loads((DATA / "skill_fork_before.json").read_text()).items():
        await app.replayer().replay_workflow(WorkflowHistory.from_json(run_id, text))


async def test_the_sub_agent_runs_with_the_parents_extensions(engine: Any, tmp_path: Path) -> None:
    """The fork's model calls and tool calls pass through the parent's ``Tally`` (its
    instructions, middleware and tool, in the parent's state), whose state the parent keeps;
    ``Skills`` lists the fork its unforked skills only."""
    requests: list[ModelRequest] = []
    async with engine(kit.make_agent(requests, tmp_path), tmp_path) as run:
        out = await run(kit.fresh("shared"), "Read the report.")
    tools = "['list_skills', 'load_skill', 'read_skill_resource', 'tally']"
    said = f"digest of Read the report. {tools} <2 model calls, tools ['load_skill', 'tally']>"
    assert (out.status, out.text) == ("completed", f"done: {said}")
    assert out.calls == [
        ("m1.c1", "succeeded", said, None),
        ("m1.c1/m1.c1", "succeeded", "2 model calls, tools ['load_skill', 'tally']", None),
    ]
    assert out.usage == 4
    assert out.tally == {"models": 4, "tools": ["load_skill", "tally"]}
    marks = [r.instructions.split("[tally ")[1].split("]")[0] for r in requests]
    assert marks == [
        "main: 0 model calls so far",
        "sub-agent: 1 model calls so far",
        "sub-agent: 2 model calls so far",
        "main: 3 model calls so far",
    ]
    fork = requests[1].instructions
    assert "- style" in fork and "- digest" not in fork  # Skills' listing for a sub-agent


async def test_a_sub_agents_list_skills_leaves_out_forked_skills(
    engine: Any, tmp_path: Path
) -> None:
    """``list_skills`` called by the fork's sub-agent lists what the built-in engine lists for
    a sub-agent: its unforked skills only (a fork runs only from the main agent)."""

    def model(request: ModelRequest) -> ModelResponse:
        forked = "carrying out the skill 'digest'" in (request.instructions or "")
        if forked and not any(m.role == "tool" for m in request.messages):
            return tool_calls(("list_skills", {}))
        return kit.answer(request)

    agent = sr.Agent(
        name=kit.AGENT,
        instructions="You delegate.",
        model=FunctionModel(model),
        extensions=[Skills(kit.prepare(tmp_path))],
    )
    async with engine(agent, tmp_path) as run:
        out = await run(kit.fresh("listed"), "Read the report.")
    assert out.status == "completed"
    (listed,) = [c for c in out.calls if c[0] == "m1.c1/m1.c1"]
    assert listed[1] == "succeeded"
    assert "style" in (listed[2] or "") and "digest" not in (listed[2] or "")
