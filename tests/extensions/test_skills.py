"""Skills: folders parsed strictly, listed and loaded by tool, kept in context, forks resumed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.chat import ModelRequest, ModelResponse, ToolResultPart
from steadyrun.context import DEFAULT_SUMMARY_INSTRUCTION
from steadyrun.extensions import SubAgents, child_run_id
from steadyrun.extensions.skills import Skill, Skills, resume_or_review
from steadyrun.records import CallRecord
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GUIDE_BODY = "# Guide\n\nAlways answer in haiku."


def write_skill(
    root: Path,
    name: str,
    front: str | None = None,
    body: str = GUIDE_BODY,
    files: dict[str, str] | None = None,
) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    if front is None:
        front = f"name: {name}\ndescription: The {name} skill."
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    for path, content in (files or {}).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(content)
    return folder


def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "guide", files={"notes.md": "the notes", "templates/reply.txt": "Dear {x}"})
    write_skill(
        root,
        "reporter",
        front="name: reporter\ndescription: Writes and sends a report.\ncontext: fork",
        body="Send the report with send_report, check it with slow_check, then say 'sent'.",
    )
    return root


def results_of(request: ModelRequest) -> list[ToolResultPart]:
    return [
        p
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    ]


# -- parsing -------------------------------------------------------------------------------


def test_a_skill_folder_is_parsed(tmp_path: Path) -> None:
    front = "\n".join(
        [
            "# a comment",
            "name: guide",
            'description: "Answers \\"politely\\" # not a comment"',
            "context: fork",
            "license: 'it''s MIT'  # a comment",
            "user-invocable: false",
            "version: 1.0",
            "",
            "metadata:",
            "  author: someone",
            "  internal: TRUE",
        ]
    )
    folder = write_skill(
        tmp_path,
        "guide",
        front=front,
        body="\n\n" + GUIDE_BODY + "\n\n",
        files={"b.md": "b", "a/c.md": "c", ".hidden": "h", "__pycache__/x.pyc": "x"},
    )
    skill = Skills(folder).skills["guide"]
    assert skill == Skill(
        name="guide",
        description='Answers "politely" # not a comment',
        body=GUIDE_BODY,
        path=folder,
        forked=True,
        resources=("a/c.md", "b.md"),
        metadata={
            "license": "it's MIT",
            "user-invocable": False,
            "version": "1.0",
            "metadata": {"author": "someone", "internal": True},
        },
    )


def test_a_long_name_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "a" * 65)
    with pytest.raises(sr.UsageError, match="at most 64"):
        Skills(tmp_path)


def test_a_body_over_the_limit_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "guide", body="x" * 101)
    with pytest.raises(sr.UsageError, match="over the limit of 100"):
        Skills(tmp_path, max_body_chars=100)
    assert Skills(tmp_path, max_body_chars=101).skills["guide"].body == "x" * 101


def test_folder_problems_are_refused(tmp_path: Path) -> None:
    with pytest.raises(sr.UsageError, match="does not exist"):
        Skills(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(sr.UsageError, match="holds no skill folders"):
        Skills(tmp_path / "empty")
    (tmp_path / "empty" / "stray").mkdir()
    with pytest.raises(sr.UsageError, match="has no SKILL.md"):
        Skills(tmp_path / "empty")
    write_skill(tmp_path / "one", "guide")
    write_skill(tmp_path / "two", "guide")
    with pytest.raises(sr.UsageError, match="two skills are named 'guide'"):
        Skills([tmp_path / "one", str(tmp_path / "two")])
    with pytest.raises(sr.UsageError, match="at least one folder"):
        Skills([])


def test_a_folder_may_be_one_skill_and_reload_reads_again(tmp_path: Path) -> None:
    single = write_skill(tmp_path / "single", "guide")
    assert list(Skills(single).skills) == ["guide"]

    root = tmp_path / "many"
    write_skill(root, "guide")
    skills = Skills(root)
    run = skills.for_run()
    write_skill(root, "another")
    skills.reload()
    assert list(skills.skills) == ["another", "guide"]
    assert list(run.skills) == ["guide"]  # a run keeps the skills it started with
    (root / "broken").mkdir()
    with pytest.raises(sr.UsageError):
        skills.reload()
    assert list(skills.skills) == ["another", "guide"]  # a failed reload keeps the old ones


def test_the_example_skills_parse() -> None:
    skills = Skills(EXAMPLES / "skills").skills
    assert sorted(skills) == ["order-digest", "refund-policy"]
    assert skills["order-digest"].forked and not skills["refund-policy"].forked
    assert skills["refund-policy"].resources == ("limits.md",)


# -- listing and loading -------------------------------------------------------------------


async def test_the_model_lists_and_loads_skills(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            tool_calls(("list_skills", {})),
            tool_calls(("load_skill", {"name": "guide"}), ("load_skill", {"name": "nope"})),
            tool_calls(("load_skill", {"name": "reporter"})),
            text("done"),
        ]
    )
    agent = sr.Agent(name="a", model=model, extensions=[Skills(skills_root(tmp_path))])
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.status == "completed"
    listing = "- guide: The guide skill.\n- reporter (sub-agent): Writes and sends a report."
    assert listing in model.requests[0].instructions
    assert "load_skill" in model.requests[0].instructions
    assert result.call("m1.c1").result == listing
    loaded = result.call("m2.c1").result or ""
    assert loaded.startswith("Skill 'guide' loaded.")
    assert GUIDE_BODY in loaded
    assert "- notes.md\n- templates/reply.txt" in loaded
    assert "no skill 'nope' (skills: guide, reporter)" in (result.call("m2.c2").error or "")
    assert "call load_skill again with the task" in (result.call("m3.c1").error or "")


async def test_skills_can_stay_out_of_the_instructions(tmp_path: Path) -> None:
    model = ScriptedModel([text("hi")])
    ext = Skills(skills_root(tmp_path), show_in_instructions=False)
    await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=model, extensions=[ext]), run_id="r", input="go"
    )
    assert "guide" not in model.requests[0].instructions


async def test_a_loaded_skill_stays_verbatim_in_a_small_context(tmp_path: Path) -> None:
    body = "Rules of the guide:\n" + "\n".join(f"{i}. a rule worth keeping" for i in range(60))
    write_skill(tmp_path, "guide", body=body)
    policy = sr.ContextPolicy(
        window=2_000,
        offload_min_bytes=0,  # results over 800 bytes are offloaded...
        keep_rounds=1,
        clear_share=0.3,
        summary_share=0.5,
        summary_tokens=200,
    )
    assert len(body) > policy.offload_bytes()  # ...the skill's text too, were it not intact
    rounds = 0
    summaries = 0

    def respond(request: ModelRequest) -> ModelResponse:
        nonlocal rounds, summaries
        if request.instructions == DEFAULT_SUMMARY_INSTRUCTION:
            summaries += 1
            return text("summary of the earlier work")
        rounds += 1
        if rounds == 1:
            return tool_calls(("load_skill", {"name": "guide"}))
        if rounds <= 16:
            return tool_calls(("fetch", {"page": rounds}))
        return text("done")

    @sr.tool(replayable=True)
    def fetch(page: int) -> str:
        """Fetch a page.

        Args:
            page: Which.
        """
        return f"page {page}: " + "lorem ipsum " * 60

    model = FunctionModel(respond)
    ext = Skills(tmp_path)
    agent = sr.Agent(name="a", model=model, tools=[fetch], extensions=[ext], context=policy)
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.status == "completed"
    loaded = result.call("m1.c1").result
    assert loaded is not None and body in loaded
    last = [r for r in model.requests if r.instructions != DEFAULT_SUMMARY_INSTRUCTION][-1]
    contents = [p.content for p in results_of(last)]
    assert loaded in contents  # verbatim: not offloaded, cleared or summarized
    # The policy did trim the rest: the early pages are gone from the context.
    assert summaries > 0
    assert not any(c.startswith("page 2:") for c in contents)


# -- resources -----------------------------------------------------------------------------


async def run_reads(root: Path, *reads: dict[str, str], **kw: int) -> sr.RunResult:
    model = ScriptedModel([tool_calls(*[("read_skill_resource", r) for r in reads]), text("done")])
    agent = sr.Agent(name="a", model=model, extensions=[Skills(root, **kw)])
    return await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")


async def test_resources_are_read_inside_the_skill_folder_only(tmp_path: Path) -> None:
    root = skills_root(tmp_path)
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", root / "guide" / "escape.md")
    os.symlink(root / "guide" / "notes.md", root / "guide" / "alias.md")  # inside: allowed
    result = await run_reads(
        root,
        {"skill": "guide", "path": "notes.md"},
        {"skill": "guide", "path": "./templates//reply.txt"},
        {"skill": "guide", "path": "alias.md"},
        {"skill": "guide", "path": "../reporter/SKILL.md"},
        {"skill": "guide", "path": str(tmp_path / "secret.txt")},
        {"skill": "guide", "path": "escape.md"},
        {"skill": "guide", "path": "missing.md"},
        {"skill": "nope", "path": "notes.md"},
        {"skill": "guide", "path": " "},
    )
    calls = result.calls
    assert [c.result for c in calls[:3]] == ["the notes", "Dear {x}", "the notes"]
    errors = [c.error or "" for c in calls[3:]]
    assert "goes up with '..'" in errors[0]
    assert "is absolute" in errors[1]
    assert "has no resource 'escape.md'" in errors[2]
    assert "alias.md, notes.md, templates/reply.txt" in errors[2]
    assert "has no resource 'missing.md'" in errors[3]
    assert "no skill 'nope'" in errors[4]
    assert "give the resource's path" in errors[5]
    assert all(c.status == "failed" for c in calls[3:])


async def test_a_resource_replaced_by_an_escaping_link_is_refused(tmp_path: Path) -> None:
    root = skills_root(tmp_path)
    (tmp_path / "secret.txt").write_text("secret")
    ext = Skills(root)
    notes = root / "guide" / "notes.md"
    notes.unlink()
    os.symlink(tmp_path / "secret.txt", notes)
    model = ScriptedModel(
        [tool_calls(("read_skill_resource", {"skill": "guide", "path": "notes.md"})), text("ok")]
    )
    result = await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=model, extensions=[ext]), run_id="r", input="go"
    )
    assert "leads outside the skill's folder" in (result.calls[0].error or "")


async def test_large_and_binary_resources_are_refused(tmp_path: Path) -> None:
    root = skills_root(tmp_path)
    (root / "guide" / "big.md").write_text("x" * 11)
    (root / "guide" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    result = await run_reads(
        root,
        {"skill": "guide", "path": "big.md"},
        {"skill": "guide", "path": "blob.bin"},
        max_resource_bytes=10,
    )
    assert "larger than the limit of 10 bytes" in (result.calls[0].error or "")
    assert "not UTF-8 text" in (result.calls[1].error or "")


# -- forked skills -------------------------------------------------------------------------


def is_fork(request: ModelRequest) -> bool:
    return request.instructions.startswith("You are a sub-agent carrying out the skill")


def main_agent(
    respond_fork: Callable[[ModelRequest], ModelResponse],
    root: Path,
    *tools: sr.Tool,
    fork_limits: sr.Limits | None = None,
) -> sr.Agent:
    def respond(request: ModelRequest) -> ModelResponse:
        if is_fork(request):
            return respond_fork(request)
        results = results_of(request)
        if not results:
            return tool_calls(("load_skill", {"name": "reporter", "task": "report on Q3"}))
        return text(f"main: {results[-1].content}")

    return sr.Agent(
        name="main",
        instructions="You are the main agent.",
        model=FunctionModel(respond),
        tools=list(tools),
        extensions=[Skills(root, fork_limits=fork_limits)],
    )


async def test_a_forked_skill_runs_in_a_sub_agent(tmp_path: Path) -> None:
    root = skills_root(tmp_path)
    seen: list[ModelRequest] = []

    def fork(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        names = [p.name for p in results_of(request)]
        if not names:
            return tool_calls(("load_skill", {"name": "guide"}))
        if names == ["load_skill"]:
            return tool_calls(("load_skill", {"name": "reporter", "task": "again"}))
        return text("the report")

    agent = main_agent(fork, root)
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.status == "completed"
    assert result.text == "main: the report"
    assert result.call("m1.c1").result == "the report"
    first = seen[0]
    assert "Send the report with send_report" in first.instructions
    assert "You are the main agent" not in first.instructions
    assert "- guide: The guide skill." in first.instructions
    assert "reporter" not in first.instructions.split("Available skills:")[1]
    assert [m.text for m in first.messages] == ["report on Q3"]
    # The sub-agent's calls are copied under the load_skill call.
    sub = [c for c in result.calls if c.parent_id == "m1.c1"]
    assert [(c.id, c.status) for c in sub] == [
        ("m1.c1/m1.c1", "succeeded"),
        ("m1.c1/m2.c1", "failed"),
    ]
    assert GUIDE_BODY in (sub[0].result or "")
    assert "runs in a sub-agent; only the main agent can" in (sub[1].error or "")
    # Its usage is the run's: 2 main model calls and 3 of the sub-agent.
    assert result.usage.requests == 5


async def test_a_failing_fork_fails_the_load(tmp_path: Path) -> None:
    def fork(request: ModelRequest) -> ModelResponse:
        return tool_calls(("load_skill", {"name": "guide"}))  # never finishes

    agent = main_agent(fork, skills_root(tmp_path), fork_limits=sr.Limits(max_iterations=2))
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.status == "completed"
    error = result.call("m1.c1").error or ""
    assert "SubAgentFailed: the skill's sub-agent did not finish" in error


async def test_general_sub_agents_see_only_unforked_skills(tmp_path: Path) -> None:
    def respond(request: ModelRequest) -> ModelResponse:
        results = results_of(request)
        if "delegate" in {t.name for t in request.tools}:
            if not results:
                return tool_calls(("delegate", {"task": "look"}))
            return text(results[-1].content)
        if not results:
            assert "(sub-agent)" not in request.instructions
            return tool_calls(("list_skills", {}))
        return text(results[-1].content)

    agent = sr.Agent(
        name="a",
        model=FunctionModel(respond),
        extensions=[Skills(skills_root(tmp_path)), SubAgents()],
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="go")
    assert result.text == "- guide: The guide skill."


class Reporter:
    """Tools of the forked skill's sub-agent, with a crash point."""

    def __init__(self, crash_in: str) -> None:
        self.crash_in = crash_in
        self.crash = asyncio.Event()
        self.runs: list[str] = []

        @sr.tool(side_effects=True)
        async def send_report(text: str) -> str:
            """Send the report.

            Args:
                text: The report.
            """
            return await self._body("send_report", "sent")

        @sr.tool(side_effects=False)
        async def slow_check() -> str:
            """Check the report arrived."""
            return await self._body("slow_check", "arrived")

        self.tools = (send_report, slow_check)

    async def _body(self, name: str, value: str) -> str:
        self.runs.append(name)
        if name == self.crash_in and not self.crash.is_set():
            self.crash.set()
            await hang()
        return value

    @staticmethod
    def fork(request: ModelRequest) -> ModelResponse:
        names = [p.name for p in results_of(request)]
        if not names:
            return tool_calls(("send_report", {"text": "Q3"}))
        if names == ["send_report"]:
            return tool_calls(("slow_check", {}))
        return text(f"report done ({results_of(request)[-1].content})")


async def test_a_crash_inside_a_fork_resumes_the_sub_agent(tmp_path: Path) -> None:
    store = sr.MemoryStore()
    reporter = Reporter(crash_in="slow_check")
    agent = main_agent(reporter.fork, skills_root(tmp_path), *reporter.tools)
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="go"), reporter.crash)
    assert reporter.runs == ["send_report", "slow_check"]

    result = await sr.Runtime(store, agents=[agent]).resume("r")
    assert result.status == "completed"
    assert reporter.runs == ["send_report", "slow_check"]  # nothing ran twice
    load = result.call("m1.c1")
    assert load.status == "succeeded"
    assert load.result is not None and load.result.startswith("report done")
    sub = {c.name: c.status for c in result.calls if c.parent_id == "m1.c1"}
    assert sub == {"send_report": "succeeded", "slow_check": "interrupted"}
    assert result.text == f"main: {load.result}"


async def test_a_crash_during_a_forks_side_effect_needs_review(tmp_path: Path) -> None:
    store = sr.MemoryStore()
    reporter = Reporter(crash_in="send_report")
    agent = main_agent(reporter.fork, skills_root(tmp_path), *reporter.tools)
    await crash_when(sr.Runtime(store).run(agent, run_id="r", input="go"), reporter.crash)

    result = await sr.Runtime(store, agents=[agent]).resume("r")
    assert result.status == "completed"
    assert reporter.runs == ["send_report"]  # not repeated
    load = result.call("m1.c1")
    assert load.status == "needs_review"
    assert "The skill 'reporter' was interrupted while its sub-agent was running send_report" in (
        load.result or ""
    )
    # The fork's run is ended, not left running, and its records are under the load call.
    child = await store.load(child_run_id("r", "m1.c1"))
    assert child is not None and child.run.status == "failed"
    assert [(c.name, c.status) for c in child.calls] == [("send_report", "needs_review")]
    sub = [(c.id, c.status) for c in result.calls if c.parent_id == "m1.c1"]
    assert sub == [("m1.c1/m1.c1", "needs_review")]


async def test_an_interrupted_unforked_load_runs_again(tmp_path: Path) -> None:
    ext = Skills(skills_root(tmp_path)).for_run()
    record = CallRecord(
        id="m1.c1", name="load_skill", arguments='{"name": "guide"}', status="running", rev=2
    )
    queued = await ext.recover_call(record)
    assert queued is not None and (queued.status, queued.rev) == ("queued", 3)
    assert await ext.recover_call(CallRecord(id="m1.c2", name="other", status="running")) is None
    bad = CallRecord(id="m1.c3", name="load_skill", arguments="[", status="running")
    assert await ext.recover_call(bad) is None


def test_resume_or_review_is_a_rule_of_the_child_calls() -> None:
    record = CallRecord(id="m1.c1", name="load_skill", status="running", rev=1)
    done = CallRecord(id="m1.c1", name="send", status="succeeded", side_effects=True)
    reading = CallRecord(id="m2.c1", name="read", status="running", side_effects=False)
    replaying = CallRecord(
        id="m2.c2", name="put", status="running", side_effects=True, replayable=True
    )
    sending = CallRecord(id="m2.c3", name="send", status="running", side_effects=True)
    assert resume_or_review(record, [], "it").status == "queued"
    assert resume_or_review(record, [done, reading, replaying], "it").status == "queued"
    review = resume_or_review(record, [done, sending], "The skill 'x'")
    assert review.status == "needs_review" and review.rev == 2
    assert review.result is not None and review.result.startswith(
        "The skill 'x' was interrupted while its sub-agent was running send"
    )


def test_the_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "skills_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "m5.c1/m1.c2 lookup_order -> succeeded" in out.stdout
    assert out.stdout.rstrip().splitlines()[-2] == "run: completed"
