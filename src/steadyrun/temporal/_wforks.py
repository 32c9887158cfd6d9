"""Forked skills on Temporal: a ``load_skill`` of a skill with ``context: fork`` as a child.

On the built-in engine ``Skills.load`` drives the fork's sub-agent inside the tool body
(``RunHandle.run_subagent``). ``Skills`` does I/O, so its tools run in the ``steadyrun.tool``
activity on Temporal, where there are no sub-agents. The skills were read when ``Skills`` was
built (in the worker), so the workflow knows without I/O which skills are forked: the
workflow's ``CallRunner`` runs a forked skill's load here, as a child ``AgentWorkflow`` of the
fork's agent (workflow id ``<run>/<call>``, registered by the app as
``<agent>.skill.<name>``), exactly as a delegation of ``SubAgents`` runs
(``_subagents.run_delegation``): the child's calls copied under the load, its usage counted,
a child that did not complete failing the call with ``Texts.skill_failed``, a child workflow
that failed settling the call ``needs_review``, a cancel of the run cancelling the child.
Every other load (an unforked skill, an unknown name) runs in the activity, as before.

Runs from before ``PATCH_SKILL_FORK`` ran a forked load in the activity (where it failed):
they replay so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyrun._texts import Texts
    from steadyrun.extensions.skills import Skills
    from steadyrun.records import CallRecord
    from steadyrun.runtime import Agent
    from steadyrun.runtime._extension import RunHandle, ToolCall
    from steadyrun.temporal._subagents import Delegation, MainOnly, run_delegation

__all__ = ["PATCH_SKILL_FORK", "Forks", "fork_agents"]

PATCH_SKILL_FORK = "steadyrun.skill-fork-child"
"""Marks runs whose forked skills' loads run as child workflows."""

LOAD = "load_skill"


@dataclass(frozen=True, slots=True)
class Forks:
    """The forked skills of an agent's ``Skills``: skill name -> the child it runs.

    Attributes:
        skills: The forked skills' children, by skill name.
    """

    skills: dict[str, Delegation] = field(default_factory=dict)

    @classmethod
    def of(cls, agent: Agent) -> Forks:
        """The forked skills of ``agent``'s ``Skills`` (read when it was built: no I/O)."""
        out = {}
        for ext in agent.extensions:
            if isinstance(ext, Skills):
                for skill in ext.skills.values():
                    if skill.forked:
                        out[skill.name] = Delegation(
                            tool=LOAD,
                            child=f"{agent.name}.skill.{skill.name}",
                            typed=False,
                            limits=ext.fork_limits,
                            failure="skill_failed",
                        )
        return cls(out)

    def of_call(self, call: ToolCall) -> Delegation | None:
        """The child a ``load_skill`` call runs, when it loads a forked skill."""
        if call.tool.name != LOAD or not self.skills:
            return None
        name = call.args.get("name")
        fork = self.skills.get(name.strip()) if isinstance(name, str) else None
        # Only a forked load asks for the marker: other runs' histories stay as they were.
        if fork is None or not workflow.patched(PATCH_SKILL_FORK):
            return None
        return fork

    async def run(
        self,
        fork: Delegation,
        call: ToolCall,
        save: Callable[[CallRecord], Any],
        *,
        subagent: bool,
    ) -> Any:
        """Run the forked load as a child workflow; what ``Skills.load`` would return.

        Raises:
            ValueError: The run is a sub-agent's, or the call gives no task (as
                ``Skills.load`` refuses them).
            SubAgentFailed: The child did not complete (``Texts.skill_failed``).
        """
        texts = call.context.texts
        name = fork.child.rsplit(".skill.", 1)[1]
        if subagent:
            raise ValueError(texts.skill_fork_in_subagent.format(name=name))
        task = call.args.get("task")
        if not isinstance(task, str) or not task.strip():
            raise ValueError(texts.skill_fork_needs_task.format(name=name))
        return await run_delegation(fork, call, save)


def fork_agents(agent: Agent, texts: Texts) -> list[Agent]:
    """The agents of ``agent``'s forked skills, built as ``Skills`` builds them."""
    handle = cast(RunHandle, MainOnly(agent))
    out = []
    for ext in agent.extensions:
        if isinstance(ext, Skills):
            for skill in ext.skills.values():
                if skill.forked:
                    out.append(ext.for_run()._fork_agent(skill, handle, texts))
    return out
