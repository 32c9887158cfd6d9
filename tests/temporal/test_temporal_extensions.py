"""Extensions whose hooks do I/O on Temporal: the memory extension and skills reading files.

Their observer hooks (memory recall, extraction) and their tools (``remember``,
``read_skill_resource``) run as activities: the run gives the same answer as on the built-in
engine, and replaying its history touches neither the bank nor the files.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from test_temporal_engine import connect  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.extensions import Memory, Skills, SqliteMemoryBank  # noqa: E402
from steadyrun.temporal import TemporalApp, TemporalOptions, TemporalRuns  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402


class CountingBank:
    """A ``SqliteMemoryBank`` that counts the calls made on it."""

    def __init__(self, path: Path) -> None:
        self.inner = SqliteMemoryBank(path)
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)  # copies probe these before ``inner`` exists
        method = getattr(self.inner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await method(*args, **kwargs)

        return counted


def rounds(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "tool")


def last_result(request: ModelRequest) -> str:
    tool = [m for m in request.messages if m.role == "tool"][-1]
    return " ".join(p.content for p in tool.parts if hasattr(p, "content"))


def memory_model(request: ModelRequest) -> ModelResponse:
    if rounds(request) == 0:
        return tool_calls(("remember", {"text": "The user drinks green tea"}))
    recalled = "Rex" in request.instructions
    return text(f"dog: {'Rex' if recalled else 'unknown'}; {last_result(request)}")


def extractor(request: ModelRequest) -> ModelResponse:
    return tool_calls(("final_result", {"changes": [{"op": "add", "text": "Asked about the dog"}]}))


def memory_agent(bank: Any) -> sr.Agent:
    memory = Memory(bank, tools=True, extract_model=FunctionModel(extractor))
    return sr.Agent(name="mem", model=FunctionModel(memory_model), extensions=[memory])


async def _bank(path: Path) -> CountingBank:
    bank = CountingBank(path)
    await bank.add("default", "The user's dog is called Rex")
    bank.calls = 0
    return bank


async def test_memory_recalls_remembers_and_extracts_in_activities(
    temporal_server: Any, tmp_path: Path
) -> None:
    question = "What is my dog called?"
    builtin_bank = await _bank(tmp_path / "builtin-mem.db")
    agent = memory_agent(builtin_bank)
    runtime = sr.Runtime(sr.SqliteStore(tmp_path / "builtin.db"), agents=[agent])
    expected = await runtime.run(agent, run_id="mem", input=question)

    bank = await _bank(tmp_path / "mem.db")
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = TemporalApp(
        agents=[memory_agent(bank)],
        store=sr.SqliteStore(tmp_path / "runs.db"),
        options=TemporalOptions(task_queue=queue),
    )
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"mem-{uuid.uuid4().hex}"
    async with app.worker(client):
        handle = await runs.start("mem", run_id=run_id, input=question)
        out = await runs.result(run_id)
        history = await handle.fetch_history()

    assert out.status == expected.status == "completed"
    assert out.text == expected.text
    assert out.text is not None and out.text.startswith("dog: Rex; ")  # recalled
    texts = [m.text for m in await bank.list("default")]
    assert texts == [m.text for m in await builtin_bank.list("default")]
    assert texts == [
        "The user's dog is called Rex",
        "The user drinks green tea",  # the remember tool
        "Asked about the dog",  # extraction when the run completed
    ]
    assert out.usage["requests"] == expected.usage.requests  # the extraction call counts

    # The hooks ran in activities: replaying the history asks the bank nothing.
    used = bank.calls
    await app.replayer().replay_workflow(history)
    assert used > 0 and bank.calls == used


def _write_skill(root: Path) -> Path:
    folder = root / "guide"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: guide\ndescription: How to answer.\n---\nAnswer with the notes.\n"
    )
    (folder / "notes.md").write_text("the notes say: be brief")
    return root


def skills_model(request: ModelRequest) -> ModelResponse:
    n = rounds(request)
    if n == 0:
        return tool_calls(("load_skill", {"name": "guide"}))
    if n == 1:
        return tool_calls(("read_skill_resource", {"skill": "guide", "path": "notes.md"}))
    listed = "guide" in request.instructions
    return text(f"listed={listed}; {last_result(request)}")


async def test_skills_read_their_files_in_activities(temporal_server: Any, tmp_path: Path) -> None:
    root = _write_skill(tmp_path / "skills")

    def agent() -> sr.Agent:
        return sr.Agent(
            name="skilled", model=FunctionModel(skills_model), extensions=[Skills(root)]
        )

    builtin = agent()
    runtime = sr.Runtime(sr.SqliteStore(tmp_path / "builtin.db"), agents=[builtin])
    expected = await runtime.run(builtin, run_id="s", input="Help me.")

    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = TemporalApp(
        agents=[agent()],
        store=sr.SqliteStore(tmp_path / "runs.db"),
        options=TemporalOptions(task_queue=queue),
    )
    runs = TemporalRuns(client, task_queue=queue)
    run_id = f"skills-{uuid.uuid4().hex}"
    async with app.worker(client):
        handle = await runs.start("skilled", run_id=run_id, input="Help me.")
        out = await runs.result(run_id)
        history = await handle.fetch_history()

    assert out.status == expected.status == "completed"
    assert out.text == expected.text == "listed=True; the notes say: be brief"
    # The file was read in an activity: the replay does not read it (it is gone).
    (root / "guide" / "notes.md").unlink()
    await app.replayer().replay_workflow(history)
    kinds = {
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert "steadyrun.tool" in kinds
