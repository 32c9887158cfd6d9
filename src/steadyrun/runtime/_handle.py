"""``ExecutionHandle``: the runtime's ``RunHandle``, what an extension may do with its run.

Chiefly: drive a sub-agent as a durable child run. The child's id is derived from the
delegation call, so running the same delegation again resumes the child from its own
checkpoint instead of starting it over; its calls are copied under the delegation call. The
execution that makes the handle passes in how to make the child's execution (``ChildFactory``),
so this module does not import the loop that imports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from steadyrun._errors import UsageError
from steadyrun._texts import Texts
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._extension import AgentView
from steadyrun.runtime._recovery import end_child_run
from steadyrun.runtime._result import RunResult
from steadyrun.runtime._state import RunState
from steadyrun.stores import FeedMessage, Store
from steadyrun.tools import Tool

__all__ = ["ChildExecution", "ChildFactory", "ExecutionHandle", "child_run_id"]


class ChildExecution(Protocol):
    """A sub-agent run's execution: started when new, resumed when stored."""

    async def start(self) -> RunResult:
        """Drive the new run."""
        ...

    async def resume(self) -> RunResult:
        """Drive the stored run on."""
        ...


class ChildFactory(Protocol):
    """Makes a sub-agent run's execution, sharing the parent's store, texts and extensions."""

    def __call__(self, *, state: RunState, agent: Agent) -> ChildExecution:
        """The execution of ``agent`` on ``state``."""
        ...


def child_run_id(run_id: str, call_id: str) -> str:
    """The id of the sub-agent run a delegation call drives."""
    return f"{run_id}/{call_id}"


class ExecutionHandle:
    """A run, as its extensions see it (``RunHandle``).

    Attributes:
        run_id: The run.
        agent: The run's agent (for a sub-agent run: the sub-agent).
        subagent: Whether this execution is a sub-agent's.
        store: The run's store.
    """

    def __init__(
        self,
        *,
        run_id: str,
        agent: Agent,
        subagent: bool,
        store: Store,
        texts: Texts,
        clock: Callable[[], datetime],
        save_call: Callable[[CallRecord], Awaitable[None]],
        child: ChildFactory,
    ) -> None:
        self.run_id = run_id
        self.agent = agent
        self.subagent = subagent
        self.store = store
        self._texts = texts
        self._clock = clock
        self._save_call = save_call
        self._child = child

    @property
    def texts(self) -> Texts:
        """The sentences the runtime writes to the model (extensions write theirs from it)."""
        return self._texts

    def subagent_tools(self) -> list[Tool]:
        """The main agent's tools a sub-agent may use: all but ``main_only`` ones."""
        return [t for t in self.agent.toolset if not t.main_only]

    async def child_snapshot_calls(self, call_id: str) -> list[CallRecord] | None:
        """The call records of the sub-agent run a delegation call drives (``None``: none yet)."""
        snap = await self.child_snapshot(call_id)
        return None if snap is None else snap.calls

    async def child_snapshot(self, call_id: str) -> RunSnapshot | None:
        """The sub-agent run a delegation call drives, as stored (``None``: none yet)."""
        return await self.store.load(child_run_id(self.run_id, call_id))

    async def end_child(self, call_id: str, child: RunSnapshot, reason: str) -> list[CallRecord]:
        """End the sub-agent run of a delegation that will not resume, and copy its records.

        Its started calls are settled as recovery settles any, its queued ones cancelled, the
        run ``failed`` (``SubAgentInterrupted``); then its records are copied under the
        delegation call, as for a finished delegation, so the host sees what it did. Ending a
        run that already ended changes nothing but the copies (done again, they change
        nothing either).

        Args:
            call_id: The delegation call.
            child: Its sub-agent run, as stored.
            reason: The ended run's error, for the host.

        Returns:
            The copies, under the delegation call.
        """
        step = end_child_run(child, self._clock(), self._texts, reason)
        calls = child.calls
        if step is not None:
            await self.store.save_step(child_run_id(self.run_id, call_id), step)
            settled = {c.id: c for c in step.calls}
            calls = [settled.get(c.id, c) for c in calls]
        return await self.record_subcalls(call_id, calls)

    async def run_subagent(self, agent: AgentView, *, call_id: str, task: str) -> RunResult:
        """Drive the sub-agent run of delegation ``call_id`` until it ends; start it if new.

        The sub-agent cannot suspend: a call of it that would wait for a person or a system
        fails with a reason its model sees. It shares this run's extension instances.

        Raises:
            UsageError: ``agent`` is not an ``Agent``.
        """
        if not isinstance(agent, Agent):
            raise UsageError(f"run_subagent needs an Agent, got {type(agent).__name__}")
        run_id = child_run_id(self.run_id, call_id)
        snap = await self.store.load(run_id)
        if snap is None:
            await self.store.append(
                run_id, FeedMessage(id=f"{run_id}:task", revision="1", role="user", content=task)
            )
            state = RunState.new(run_id, agent.name, self._clock())
        else:
            state = RunState.restore(snap)
        execution = self._child(state=state, agent=agent)
        return await (execution.start() if snap is None else execution.resume())

    async def record_subcalls(self, parent_id: str, calls: list[CallRecord]) -> list[CallRecord]:
        """Copy a sub-agent's call records into this run, under the delegation call."""
        copies = []
        for call in calls:
            copy = replace(call, id=f"{parent_id}/{call.id}", parent_id=parent_id)
            await self._save_call(copy)
            copies.append(copy)
        return copies
