"""Skills: folders of instructions (and resource files) the model lists and loads by tool.

A skill is a folder holding ``SKILL.md``: front matter (``name``, ``description``, optional
``context: fork``) then the instructions. The folders are read when ``Skills`` is built (and on
``reload``), never on the event loop of a run. The model sees every skill's name and
description in its instructions and loads one with ``load_skill``: the instructions come back
as the call's result, which context management never offloads, clears or summarizes. A forked
skill instead runs in a sub-agent (a durable child run, as ``SubAgents`` drives them) with the
instructions as its own, and ``load_skill`` returns the sub-agent's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from steadyrun._errors import UsageError
from steadyrun._texts import Texts, default_texts, texts_of
from steadyrun.extensions._skill_files import Skill, load_skills, read_resource
from steadyrun.extensions.subagents import (
    SubAgentFailed,
    recover_child_call,
    resume_child_or_review,
    why_unfinished,
)
from steadyrun.records import CallRecord
from steadyrun.runtime._agent import Agent, Limits
from steadyrun.runtime._extension import Extension, RunHandle, TurnView
from steadyrun.tools import Tool, ToolContext, tool

__all__ = ["Skill", "Skills", "resume_or_review"]

PathLike = str | os.PathLike[str]

FORK_PREAMBLE = (
    "You are a sub-agent carrying out the skill {name!r} for another agent, on the task you "
    "are given. Work on your own with your tools, then answer with the result; your answer is "
    "all the other agent will see. The skill's instructions follow."
)
"""The English preamble of a forked skill's instructions (``Texts().skill_fork_preamble``)."""


def resume_or_review(
    record: CallRecord,
    child_calls: Sequence[CallRecord],
    what: str,
    texts: Texts | None = None,
) -> CallRecord:
    """What an interrupted call that drives a sub-agent becomes on resume.

    The call is queued to run again, which resumes the child from its own checkpoint (nothing
    the child finished runs again), unless the child was running a call with side effects that
    is not replayable: its outcome is unknown, so the call needs review and nothing repeats it.

    Args:
        record: The interrupted call (status ``running``).
        child_calls: The call records of its child run (empty when the child never started).
        what: Names the call's work in the model-visible text ("the skill 'x'", say).
        texts: The texts of that text (``work_interrupted``; default: English).

    Returns:
        The call's next record: ``queued`` or ``needs_review``, at a higher ``rev``.
    """
    texts = texts or default_texts()
    return resume_child_or_review(
        record, child_calls, lambda names: texts.work_interrupted.format(what=what, names=names)
    )


class Skills(Extension):
    """Skills from folders, for the model to list and load by tool.

    The tools are ``list_skills``, ``load_skill`` and ``read_skill_resource``. Each folder
    is either a skill (it holds ``SKILL.md``) or holds skills, one per sub-folder. Sub-agents
    see the skills too, except forked ones: a fork runs only from the main agent.

    Args:
        folders: One folder or several.
        name: The extension's name (keys its state; unique among an agent's extensions).
        max_body_chars: The longest instructions a ``SKILL.md`` may hold.
        max_resource_bytes: The largest resource file ``read_skill_resource`` reads.
        fork_limits: Limits of a forked skill's sub-agent; ``max_iterations`` is its budget of
            model calls.
        show_in_instructions: Whether the skills are listed in the agent's instructions.

    What the models read is in the runtime's ``Texts`` (``skills_*``, ``skill_*``).

    Raises:
        UsageError: A folder is missing or holds no skill, a ``SKILL.md`` is missing or
            invalid, two skills share a name, or a limit is not positive.
    """

    name = "skills"

    def __init__(
        self,
        folders: PathLike | Sequence[PathLike],
        *,
        name: str = "skills",
        max_body_chars: int = 40_000,
        max_resource_bytes: int = 200_000,
        fork_limits: Limits | None = None,
        show_in_instructions: bool = True,
    ) -> None:
        if max_body_chars < 1 or max_resource_bytes < 1:
            raise UsageError("max_body_chars and max_resource_bytes must be positive")
        paths = [folders] if isinstance(folders, str | os.PathLike) else list(folders)
        if not paths:
            raise UsageError("Skills needs at least one folder")
        self.name = name
        self.folders = tuple(Path(p) for p in paths)
        self.max_body_chars = max_body_chars
        self.max_resource_bytes = max_resource_bytes
        self.fork_limits = fork_limits or Limits(max_iterations=10)
        self.show_in_instructions = show_in_instructions
        self.handle: RunHandle | None = None
        self.texts: Texts = default_texts()
        self._agents: dict[str, Agent] = {}
        self.skills: dict[str, Skill] = {}
        self.reload()

    def reload(self) -> None:
        """Read the folders again (blocking file reads: not from a running event loop).

        Runs started afterwards see the new skills; a failed reload keeps the old ones.
        """
        self.skills = load_skills(self.folders, max_body_chars=self.max_body_chars)

    def for_run(self) -> Skills:
        """An instance for one run, sharing the skills as they are now (no file reads)."""
        clone = super().for_run()
        assert isinstance(clone, Skills)
        clone.handle = None
        clone._agents = {}
        return clone

    def attach(self, handle: RunHandle) -> None:
        """Keep the run's handle (forked skills drive child runs through it) and its texts."""
        self.handle = handle
        self.texts = texts_of(handle)

    def _in_subagent(self, ctx: ToolContext) -> bool:
        # A sub-agent shares its main run's instance (the main run's handle) on the built-in
        # engine; on Temporal an instance in a tool activity has the sub-agent's own handle.
        handle = self.handle
        return handle is not None and (ctx.run_id != handle.run_id or handle.subagent)

    def visible(self, *, subagent: bool) -> list[Skill]:
        """The skills an agent may load: all of them, or for a sub-agent the unforked ones."""
        return [s for s in self.skills.values() if not (subagent and s.forked)]

    def instructions(self, view: TurnView) -> str | None:
        """The skills, by name and description, and how to use them."""
        skills = self.visible(subagent=view.subagent)
        if not self.show_in_instructions or not skills:
            return None
        texts = self.texts
        text = texts.skills_instructions
        if any(s.forked for s in skills):
            text += texts.skills_fork_instructions
        return text + texts.skills_available.format(skills=_listing(skills, texts))

    # -- tools -------------------------------------------------------------------------------

    def tools(self) -> Sequence[Tool]:
        """``list_skills``, ``load_skill`` and ``read_skill_resource``."""
        ext = self

        @tool(replayable=True, concurrency_key="")
        async def list_skills(ctx: ToolContext) -> str:
            """List the skills you can load, by name and description.

            Args:
                ctx: The call's context, filled by the runtime.
            """
            run = ext.of(ctx)
            skills = run.visible(subagent=run._in_subagent(ctx))
            return _listing(skills, ctx.texts) if skills else ctx.texts.skills_empty

        # Sub-agents may load skills too (the instructions help them with their task), so
        # load_skill is not main_only; a forked skill is refused in a sub-agent (see ``load``).
        # Its outcome is settled by ``recover_call``: an unforked load simply runs again.
        @tool(retain="intact", side_effects=True, concurrency_key="")
        async def load_skill(name: str, ctx: ToolContext, task: str | None = None) -> str:
            """Load a skill: its instructions, to follow, and the list of its resource files.

            A skill marked (sub-agent) does the work itself instead: give it the task and it
            returns the result.

            Args:
                name: The skill's name, as listed.
                task: For a (sub-agent) skill: the task, with everything it needs to know (it
                    does not see this conversation). Not used by other skills.
                ctx: The call's context, filled by the runtime.
            """
            run: Skills = ext.of(ctx)
            return await run.load(name, task, ctx)

        @tool(replayable=True, concurrency_key="")
        async def read_skill_resource(skill: str, path: str, ctx: ToolContext) -> str:
            """Read a resource file of a skill (listed when the skill is loaded).

            Args:
                skill: The skill's name.
                path: The file's path inside the skill's folder, as listed.
                ctx: The call's context, filled by the runtime.
            """
            run: Skills = ext.of(ctx)
            found = run.find(skill, subagent=run._in_subagent(ctx), texts=ctx.texts)
            return await asyncio.to_thread(
                read_resource, found, path, max_bytes=run.max_resource_bytes, texts=ctx.texts
            )

        return (list_skills, load_skill, read_skill_resource)

    # -- operations (the tools' bodies) ------------------------------------------------------

    def find(self, name: str, *, subagent: bool = False, texts: Texts | None = None) -> Skill:
        """A skill by name; ``LookupError`` (for the model, in ``texts``) when there is none."""
        texts = texts or self.texts
        skill = self.skills.get(name.strip())
        if skill is None or (subagent and skill.forked):
            known = ", ".join(s.name for s in self.visible(subagent=subagent)) or texts.skills_none
            raise LookupError(texts.skill_unknown.format(name=name, known=known))
        return skill

    async def load(self, name: str, task: str | None, ctx: ToolContext) -> str:
        """The instructions of an unforked skill, or the answer of a forked skill's sub-agent."""
        texts = ctx.texts
        skill = self.find(name, texts=texts)
        if not skill.forked:
            return texts.skill_loaded.format(name=skill.name, instructions=_full_text(skill, texts))
        if self._in_subagent(ctx):
            # The run's handle drives children of the main run only: a nested fork's child id
            # would be derived from this sub-agent's call id in the main run's namespace.
            raise ValueError(texts.skill_fork_in_subagent.format(name=skill.name))
        if task is None or not task.strip():
            raise ValueError(texts.skill_fork_needs_task.format(name=skill.name))
        handle = self.handle
        if handle is None:
            raise UsageError(f"extension {self.name!r} is not attached to a run")
        agent = self._fork_agent(skill, handle, texts)
        result = await handle.run_subagent(agent, call_id=ctx.call_id, task=task)
        await handle.record_subcalls(ctx.call_id, result.calls)
        ctx.report_usage(result.usage)
        if result.status != "completed":
            why = why_unfinished(result, texts, agent.limits)
            raise SubAgentFailed(texts.skill_failed.format(why=why))
        return result.text or ""

    def _fork_agent(self, skill: Skill, handle: RunHandle, texts: Texts) -> Agent:
        agent = self._agents.get(skill.name)  # no await between the check and the store
        if agent is None:
            main = handle.agent
            preamble = texts.skill_fork_preamble.format(name=skill.name)
            agent = Agent(
                name=f"{main.name}.skill.{skill.name}",
                model=main.client,
                instructions=preamble + "\n\n" + _full_text(skill, texts),
                tools=handle.subagent_tools(),
                limits=self.fork_limits,
                settings=main.settings,
                deps=main.deps,
                can_suspend=False,
            )
            self._agents[skill.name] = agent
        return agent

    async def recover_call(self, record: CallRecord) -> CallRecord | None:
        """Run an interrupted ``load_skill`` again (a fork resumes its sub-agent).

        A fork whose sub-agent was running a side effect of unknown outcome needs review.
        """
        if record.name != "load_skill":
            return None
        try:
            name = json.loads(record.arguments).get("name")
        except (ValueError, AttributeError):
            return None
        skill = self.skills.get(name) if isinstance(name, str) else None
        if skill is None or not skill.forked or self.handle is None:
            # Loading instructions changes nothing: it may simply run again.
            return replace(record, rev=record.rev + 1, status="queued", started_at=None)
        texts = self.texts
        what = texts.skill_what.format(name=skill.name)
        # The same rule as a delegation's: a fork that needs review has its run ended.
        return await recover_child_call(
            self.handle, record, lambda names: texts.work_interrupted.format(what=what, names=names)
        )


def _listing(skills: Sequence[Skill], texts: Texts) -> str:
    mark = texts.skill_forked_mark
    return "\n".join(f"- {s.name}{mark if s.forked else ''}: {s.description}" for s in skills)


def _full_text(skill: Skill, texts: Texts) -> str:
    text = skill.body
    if skill.resources:
        listed = "\n".join(f"- {r}" for r in skill.resources)
        text += texts.skill_resources.format(name=skill.name, resources=listed)
    return text
