"""Sub-agents and the parent's extensions on either engine: a forked skill, a shared extension.

``make_agent`` gives an agent with ``Skills`` (one forked skill, ``digest``, and one plain,
``style``) and ``Tally``, a user extension whose state counts the model calls and tool calls
it saw (its instructions show the count, its tool ``tally`` reads it). The model answers by
who asks: the main agent loads the forked skill, the fork's sub-agent calls ``tally`` and
answers with what its instructions and the tool said. ``builtin`` and ``on_temporal`` run it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.extensions import Extension, ModelCall, ModelNext, Skills, ToolCall, ToolNext
from steadyrun.testing import FunctionModel, text, tool_calls
from steadyrun.tools import Tool, ToolContext, tool

AGENT = "skilled"


class Tally(Extension):
    """Counts the model and tool calls its middleware saw, in its run state."""

    name = "tally"
    temporal_io = False  # deterministic: it runs in the workflow on Temporal

    def __init__(self) -> None:
        self.models = 0
        self.tools_seen: list[str] = []

    def save_state(self) -> Any:
        return {"models": self.models, "tools": list(self.tools_seen)}

    def restore_state(self, state: Any) -> None:
        state = state or {}
        self.models = int(state.get("models", 0))
        self.tools_seen = list(state.get("tools", []))

    def instructions(self, view: Any) -> str | None:
        who = "sub-agent" if view.subagent else "main"
        return f"[tally {who}: {self.models} model calls so far]"

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        self.models += 1
        return await next(call)

    async def wrap_tool(self, call: ToolCall, next: ToolNext) -> Any:
        self.tools_seen.append(call.tool.name)
        return await next(call)

    def tools(self) -> list[Tool]:
        ext = self

        @tool(replayable=True)
        async def tally(ctx: ToolContext) -> str:
            """Say what the tally saw so far.

            Args:
                ctx: The call's context.
            """
            run: Tally = ext.of(ctx)
            return f"{run.models} model calls, tools {run.tools_seen}"

        return [tally]


def prepare(folder: Path) -> Path:
    """The skills' folder: ``digest`` (forked) and ``style`` (loaded as instructions)."""
    skills = folder / "skills"
    for name, front, body in (
        ("digest", "context: fork\n", "Digest the task in one line."),
        ("style", "", "Write plainly."),
    ):
        (skills / name).mkdir(parents=True, exist_ok=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: The {name} skill.\n{front}---\n{body}\n"
        )
    return skills


def answer(request: ModelRequest) -> ModelResponse:
    """Main: load ``digest``, then say its result. The fork: ``tally``, then say it all."""
    results = [m for m in request.messages if m.role == "tool"]
    said = " | ".join(" ".join(getattr(p, "content", "") for p in m.parts) for m in results)
    forked = "carrying out the skill 'digest'" in (request.instructions or "")
    if forked:
        tools = sorted(t.name for t in request.tools)
        if not results and "tally" in tools:
            return tool_calls(("tally", {}))
        return text(f"digest of {request.messages[0].text} {tools} <{said}>")
    if not results:
        users = [m for m in request.messages if m.role == "user"]
        task = users[-1].text if users else ""
        if task == "No task.":
            return tool_calls(("load_skill", {"name": "digest"}))
        return tool_calls(("load_skill", {"name": "digest", "task": task}))
    return text(f"done: {said}")


def make_agent(requests: list[ModelRequest], folder: Path, *, tally: bool = True) -> sr.Agent:
    """The agent: ``Skills`` (and ``Tally``); the model records every request it gets."""

    def model(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        return answer(request)

    extensions: list[Extension] = [Skills(prepare(folder))]
    if tally:
        extensions.append(Tally())
    return sr.Agent(
        name=AGENT,
        instructions="You delegate.",
        model=FunctionModel(model),
        extensions=extensions,
    )


@dataclass
class Ran:
    """A run's end as either engine tells it (child run ids named by the call)."""

    status: str
    text: str | None
    calls: list[tuple[str, str, str | None, str | None]]  # id, status, result, error
    usage: int  # model calls counted in the run's usage
    tally: Any  # Tally's saved state in the run's last checkpoint


async def ran(store: sr.Store, run_id: str, status: str, said: str | None) -> Ran:
    """What the store shows of the run."""
    snap = await store.load(run_id)
    assert snap is not None
    calls = [(c.id, c.status, c.result, c.error) for c in snap.calls]
    states = snap.checkpoint.extra.get("steadyrun.ext") or {}
    return Ran(status, said, calls, snap.run.usage.requests, states.get("tally"))


@asynccontextmanager
async def builtin(agent: sr.Agent, folder: Path, **_: Any) -> AsyncIterator[Any]:
    """The built-in engine: ``Runtime`` over a SQLite store."""
    store = sr.SqliteStore(folder / "runs.db")
    runtime = sr.Runtime(store, agents=[agent])

    async def run(run_id: str, input: str) -> Ran:
        out = await runtime.run(agent, run_id=run_id, input=input)
        return await ran(store, run_id, out.status, out.text)

    yield run
    await store.close()


@asynccontextmanager
async def on_temporal(
    agent: sr.Agent, folder: Path, *, server: Any, keep: dict[str, Any] | None = None
) -> AsyncIterator[Any]:
    """Temporal with an in-process worker; each run's history is replayed once it ended."""
    from temporalio.client import Client

    from steadyrun.temporal import TemporalApp, TemporalOptions

    client = await Client.connect(server.target)
    store = sr.SqliteStore(folder / "runs.db")
    options = TemporalOptions(task_queue=f"q-{uuid.uuid4().hex}")
    app = TemporalApp(agents=[agent], store=store, options=options)
    runs = app.runs(client)

    async def run(run_id: str, input: str) -> Ran:
        await runs.start(AGENT, run_id=run_id, input=input)
        out = await runs.result(run_id)
        history = await client.get_workflow_handle(run_id).fetch_history()
        if keep is not None:
            keep[run_id] = history
        await app.replayer().replay_workflow(history)
        return await ran(store, run_id, out.status, out.text)

    async with app.worker(client):
        yield run
    await store.close()


def fresh(prefix: str) -> str:
    """A run id of its own (workflow ids outlive a test on the shared server)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def record(server: Any, folder: Path, out: Path) -> None:
    """Record a forked skill's run to ``out`` (``{run_id: json}``), as the code is now.

    How ``data/skill_fork_before.json`` was made, with main 1ace2f3 (the fork's load ran in
    the tool activity and failed there).
    """
    keep: dict[str, Any] = {}
    async with on_temporal(
        make_agent([], folder, tally=False), folder, server=server, keep=keep
    ) as run:
        await run("skill-fork-before", "Read the report.")
    out.write_text(json.dumps({k: h.to_json() for k, h in keep.items()}))  # noqa: ASYNC240
