"""Sub-agent child workflows that outlive their delegation, as built-in child runs do.

On the built-in engine a sub-agent adopts a slow background call like any run: its model gets
the launch receipt, its turn ends, the delegation returns with its answer, and the task's
ending later gives the child a new turn whose answer the parent is told
(``SubAgents.on_restore``). A child workflow's result reaches only the parent run that started
it, and only when it completes, which it cannot while it owns a running task's activity. So:

- the parent (since ``PATCH_SUBAGENT_BACKGROUND``) starts the child with
  ``RunInput.parent`` and ``ParentClosePolicy.ABANDON``, and its delegation waits for the
  child's workflow result **or** a ``SubagentTurn`` signal (``ChildTurns``);
- the child (``ChildSide``), when its turn ends with tasks going, signals its result (the
  delegation's) and stays open owning its tasks; each ending is a new turn, whose result it
  signals too (``first=False``), the last one with ``going=False``, and then it completes;
- the parent appends each later turn as the built-in engine's follow-up message
  (``subagent:<child>:<turn>``) to its feed, wakes, and stays open while children go on;
  since ``PATCH_SUBAGENT_LATER_TURNS`` it also adds the usage the child's later turns spent
  to its own, and its extension instances take the states the turn ended with (each turn's
  signal carries them; the first turn's go to the delegation, as a returned child's do). A
  turn of the parent going on takes them at once, else its next turn does when it starts.
  The children going are carried across continue-as-new (signals reach the workflow id's
  current run, and ``ABANDON`` keeps the child when the parent's run continues as new). A
  cancel of the parent cancels them (and tells them who cancelled); a terminated parent does
  not (its children's later signals then find no workflow and are dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun._texts import Texts
    from steadyrun.chat import Usage
    from steadyrun.extensions.subagents import follow_up
    from steadyrun.records import CallRecord, RunSnapshot
    from steadyrun.runtime import RunResult
    from steadyrun.runtime._extset import EXT_STATE
    from steadyrun.runtime._loop import Execution
    from steadyrun.stores import MemoryStore
    from steadyrun.temporal._payloads import (
        SIGNAL_SUBAGENT_TURN,
        Carried,
        RunOutput,
        SubagentTurn,
    )
    from steadyrun.temporal._subagents import (
        PATCH_SUBAGENT_BACKGROUND,
        Delegation,
        record_subcalls,
        why_of,
    )
    from steadyrun.temporal._wshared import PATCH_SUBAGENT_LATER_TURNS, Engine, shared_states

if TYPE_CHECKING:
    from steadyrun.temporal._wtasks import WorkflowTasks

__all__ = ["PATCH_SUBAGENT_BACKGROUND", "ChildSide", "ChildTurns", "output_of"]


def output_of(
    result: RunResult, generation: int, *, subagent: bool, shared: dict[str, Any] | None = None
) -> RunOutput:
    """The workflow's output for ``result`` (a sub-agent's: its calls, its shared states)."""
    return RunOutput(
        run_id=result.run_id,
        status=result.status,
        text=result.text,
        completion=to_plain(result.completion, Any),
        completion_reason=result.completion_reason,
        error_kind=type(result.error).__name__ if result.error is not None else None,
        error=str(result.error) if result.error is not None else None,
        usage=to_plain(result.usage, Usage),
        generations=generation,
        calls=to_plain(result.calls, list[CallRecord]) if subagent else [],
        shared=shared,
    )


class ChildTurns:
    """The parent's side: children's signalled turns, and the children still going.

    Args:
        run_id: The parent run.
        store: The parent workflow's store (follow-ups go to its feed, copies to its calls).
        delegations: The agent's delegations, by tool name.
        texts: The run's texts.
        wake: Called when the run has something new (a child's later turn).
    """

    def __init__(
        self,
        run_id: str,
        store: MemoryStore,
        delegations: dict[str, Delegation],
        texts: Texts,
        wake: Callable[[], None],
    ) -> None:
        self.run_id = run_id
        self.store = store
        self.delegations = delegations
        self.texts = texts
        self.wake = wake
        self.early: dict[str, RunOutput] = {}  # child run id -> the result a delegation awaits
        self.going: dict[str, str] = {}  # child run id -> its delegation tool's name
        self.counted: dict[str, Usage] = {}  # child run id -> its usage the run counted
        # What children's later turns left for this run, until a turn of it takes them.
        self.due_usage = Usage()
        self.due_states: dict[str, Any] = {}
        self.live: Execution | None = None  # the run's turn going on, if one is

    def restore(self, carried: Carried) -> None:
        """Take the children going from a continued run's ``carried``."""
        self.going = dict(carried.children)
        self.counted = {k: from_plain(v, Usage) for k, v in carried.child_usage.items()}

    def carried(self, snap: RunSnapshot) -> dict[str, Any]:
        """``Carried`` fields for a continue-as-new; ``snap`` (the run's) takes what is due."""
        snap.run.usage = snap.run.usage + self.due_usage
        if self.due_states:
            states = dict(snap.checkpoint.extra.get(EXT_STATE) or {})
            snap.checkpoint.extra[EXT_STATE] = {**states, **self.due_states}
        self.due_usage, self.due_states = Usage(), {}
        counted = {k: to_plain(v, Usage) for k, v in self.counted.items()}
        return {"children": dict(self.going), "child_usage": counted}

    @contextlib.contextmanager
    def running(self, execution: Execution) -> Iterator[None]:
        """While a turn of the run goes on: it takes what is due, and what comes later."""
        self.live = execution
        try:
            self._settle()
            yield
        finally:
            self.live = None

    def _settle(self) -> None:
        """The run's turn going on takes what children's later turns left (none: later)."""
        run = self.live
        if run is None:
            return
        run.state.run.usage = run.state.run.usage + self.due_usage
        for name, state in self.due_states.items():
            inst = run.ext.by_name.get(name) if run.ext is not None else None
            if inst is not None:
                inst.restore_state(state)
        self.due_usage, self.due_states = Usage(), {}

    @property
    def outstanding(self) -> bool:
        """Whether a child whose delegation returned still has tasks going."""
        return bool(self.going)

    async def take(self, turn: SubagentTurn) -> None:
        """A child's signalled turn: the delegation's result, or a later turn to tell."""
        if turn.first and turn.run_id not in self.going:
            self.early[turn.run_id] = turn.output
            # The delegation counts it, and its states are the delegation's to take.
            self.counted[turn.run_id] = from_plain(turn.output.usage, Usage)
            return
        call_id = turn.run_id.removeprefix(self.run_id + "/")
        tool = self.going.get(turn.run_id, "delegate")
        delegation = self.delegations.get(tool)
        out = turn.output

        async def save(record: CallRecord) -> None:
            await self.store.save_call(self.run_id, record)

        await record_subcalls(call_id, out.calls, save)
        if out.status == "completed":
            answer = out.text if out.text is not None else out.completion
            message = follow_up(call_id, turn.run_id, turn.turn, self.texts, answer=answer)
        else:
            why = why_of(out, self.texts, delegation)
            message = follow_up(call_id, turn.run_id, turn.turn, self.texts, why=why)
        await self.store.append(self.run_id, message)
        if workflow.patched(PATCH_SUBAGENT_LATER_TURNS):
            self._take(turn)
        if not turn.going:
            self.going.pop(turn.run_id, None)
            self.counted.pop(turn.run_id, None)
        self.wake()

    def _take(self, turn: SubagentTurn) -> None:
        """A later turn's usage (since the child's last turn) and states, for this run."""
        usage = from_plain(turn.output.usage, Usage)
        before = self.counted.get(turn.run_id)
        if before is not None:  # unknown (a run continued before the patch): not counted
            self.due_usage = self.due_usage + (usage - before)
        self.counted[turn.run_id] = usage
        self.due_states.update(turn.output.shared or {})
        self._settle()

    async def cancel_all(self, by: str | None) -> None:
        """Cancel the children still going (the run is cancelled), telling them who did."""
        for child in list(self.going):
            handle = workflow.get_external_workflow_handle(child)
            # A child that ended meanwhile cannot be reached: nothing to cancel.
            with contextlib.suppress(Exception):
                if by is not None:
                    await handle.signal("cancelling", by)
                await handle.cancel()


class ChildSide:
    """The child's side: signal the parent when a turn ends with tasks going, and stay.

    Args:
        parent: The parent's workflow id.
        run_id: This child run.
        store: The child workflow's store.
        tasks: Its background tasks.
        changed: Whether the run has something new (a task's ending).
    """

    def __init__(
        self,
        parent: str,
        run_id: str,
        store: MemoryStore,
        tasks: WorkflowTasks,
        changed: Callable[[], bool],
    ) -> None:
        self.parent = parent
        self.run_id = run_id
        self.store = store
        self.tasks = tasks
        self.changed = changed
        self.signalled = False
        self.engine: Engine | None = None

    async def turn_ended(self, result: RunResult, generation: int, engine: Engine) -> bool:
        """After a turn: ``True`` when the child goes on to a new turn (a task's ending)."""
        snap = await self.store.load(self.run_id)
        turn = snap.checkpoint.turn if snap is not None else 1
        # A later turn exists only after the first was signalled (also before a
        # continue-as-new of this child, which does not carry the flag).
        signalled = self.signalled or turn > 1
        tasks = self.tasks
        out = output_of(result, generation, subagent=True)
        self.engine = engine  # its states go with the signals
        if result.status == "completed":
            pending = await self.store.pending(self.run_id, 0)
            if tasks.outstanding or pending:
                await self._signal(turn, out, first=not signalled, going=True)
                self.signalled = True
                if not pending:
                    await workflow.wait_condition(self.changed)
                return True
        elif tasks.outstanding:
            # A turn that did not complete: its tasks run to their end (their activities
            # are this workflow's), as a failed run's do, and the child ends.
            await workflow.wait_condition(lambda: not tasks.outstanding)
        if signalled:
            await self._signal(turn, out, first=False, going=False)
        return False

    async def _signal(self, turn: int, out: RunOutput, *, first: bool, going: bool) -> None:
        handle = workflow.get_external_workflow_handle(self.parent)
        if self.engine is not None and workflow.patched(PATCH_SUBAGENT_LATER_TURNS):
            out = replace(out, shared=shared_states(self.engine))  # the parent's to take
        signal = SubagentTurn(run_id=self.run_id, turn=turn, first=first, going=going, output=out)
        try:
            await handle.signal(SIGNAL_SUBAGENT_TURN, signal)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the parent ended (terminated): nobody to tell
            workflow.logger.warning("sub-agent %s: parent not told: %s", self.run_id, exc)
