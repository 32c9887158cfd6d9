"""Background tasks inside ``AgentWorkflow``: adoption, notification, task tools, questions.

The built-in engine's ``TaskManager`` keeps tasks in a task store and tells the run through
its feed. Here the workflow owns them: a background call starts its ``steadyrun.background``
activity without awaiting it; past the tool's ``foreground_timeout`` (or at once, when the
model asks for the background) the call's result is the launch receipt and the run goes on,
while a workflow task watches the activity. When the activity ends, the workflow appends the
same notification to the run's feed (``task:<task id>:ended``) and wakes the run, which takes
it at its next safe point, or in a new turn when it had completed. ``task_status``,
``task_output`` and ``cancel_task`` answer from the tasks held here (``TaskControls``), and
cancelling a task cancels its activity. Everything here is workflow state: deterministic,
rebuilt by replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun._errors import UsageError
    from steadyrun.background import (
        AdoptionView,
        BackgroundTool,
        Task,
        TaskInput,
        Update,
        render_progress,
        task_id_of,
    )
    from steadyrun.background._model import check_update, receipt_of, render_output
    from steadyrun.background._shared import (
        check_answer,
        ending_message,
        lost_verdict,
        new_task,
        question_item,
        split_arguments,
    )
    from steadyrun.background._task_tools import answer_task_tool
    from steadyrun.control import HostFailure
    from steadyrun.runtime._extension import ToolCall
    from steadyrun.runtime._host import PendingItem
    from steadyrun.stores import MemoryStore
    from steadyrun.temporal._background import (
        ACTIVITY_BACKGROUND,
        BackgroundInput,
        BackgroundOutcome,
        TaskUpdates,
    )

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = ["TASK_TOOLS", "WorkflowTasks", "keep_updates"]

TASK_TOOLS = frozenset({"task_status", "task_output", "cancel_task"})
"""The task tools' names: they answer from the workflow's tasks."""

_KEPT_UPDATES = 200  # per task: task_status shows the last ten


@dataclass(kw_only=True)
class _Held:
    task: Task
    tool: BackgroundTool
    handle: Any = None  # the running activity's handle
    starts: int = 0  # activities started for it (a resume starts another)
    watcher: asyncio.Task[None] | None = None
    late: bool = False
    updates: list[Update] = field(default_factory=list)
    seen: frozenset[str] = frozenset()


def keep_updates(
    kept: list[Update], seen: frozenset[str], new: Sequence[Update], limit: int
) -> tuple[list[Update], frozenset[str]]:
    """A task's updates after ``new`` arrived: each event id once, in order, the last ``limit``.

    ``seen`` holds every event id ever kept (also those past the limit), so a recovered
    operation that replays its updates from the start adds none twice. Returns the updates
    kept and the ids seen.
    """
    out, ids = list(kept), set(seen)
    for update in new:
        if update.event_id not in ids:
            ids.add(update.event_id)
            out.append(update)
    return out[-limit:] if limit > 0 else [], frozenset(ids)


class WorkflowTasks:
    """The background tasks of one workflow run (``TaskControls`` for the task tools).

    Args:
        app: The app (options, background tools).
        store: The workflow's store (the notification goes to its feed).
        wake: Called when the run has something new (a notification, a question).
        adopt: Whether calls may go to the background (a sub-agent's child workflow ends
            with its turn, so its background calls wait in the foreground).
    """

    def __init__(
        self, app: AppView, store: MemoryStore, wake: Callable[[], None], *, adopt: bool = True
    ) -> None:
        self.app = app
        self.store = store
        self.wake = wake
        self.adopt = adopt
        self.held: dict[str, _Held] = {}  # adopted: tasks
        self.foreground: dict[str, _Held] = {}  # not (yet) adopted; progress comes already
        # Called with each task that ended and its updates, once the run was told.
        self.on_end: Callable[[Task, list[Update]], None] | None = None
        # Called with a task that was adopted, waits for an answer or resumes, and its updates.
        self.on_change: Callable[[Task, list[Update]], None] | None = None

    # -- the run's view -----------------------------------------------------------------------

    @property
    def outstanding(self) -> bool:
        """Whether a task runs (its activity not ended, or its ending not yet announced)."""
        return any(not h.task.final or not h.task.notified for h in self.held.values())

    # -- a background call --------------------------------------------------------------------

    async def call(self, bt: BackgroundTool, call: ToolCall) -> str:
        """Run ``call``: its output when it ends in the foreground, else its launch receipt."""
        record, ctx = call.record, call.context
        arguments = json.loads(record.arguments or "{}")
        background, args = split_arguments(bt, arguments)
        # In the workflow, like the built-in engine's tool body before anything starts; they
        # must not do I/O here.
        args = await bt.prepare_input(args)
        task_id = task_id_of(ctx.run_id, record.id)
        known = self.held.get(task_id)
        if known is not None:  # the call runs again: never start it twice
            return receipt_of(known.task)
        now = workflow.now()
        task = new_task(
            bt, args, run_id=ctx.run_id, call_id=record.id, task_id=task_id, now=now, started=True
        )
        held = _Held(task=task, tool=bt)
        self.foreground[task_id] = held
        self._start(
            held,
            BackgroundInput(
                run_id=task.run_id, call_id=task.call_id, name=bt.name, arguments=task.arguments
            ),
        )
        timeout = bt.foreground_timeout if self.adopt else None
        if not background or not self.adopt:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(held.handle.done, timeout=timeout)
            if held.handle.done():
                del self.foreground[task_id]
                return await self._foreground(held)
            view = AdoptionView(
                task_id=task_id,
                tool=bt.name,
                arguments=task.arguments,
                elapsed=(workflow.now() - now).total_seconds(),
            )
            if not bt.should_adopt(view):
                del self.foreground[task_id]
                held.handle.cancel()
                await asyncio.gather(held.handle, return_exceptions=True)
                raise HostFailure(f"it did not finish within {timeout} s and was stopped")
        # Adopted: the same activity goes on, watched by the workflow; the run goes on too.
        self.held[task_id] = self.foreground.pop(task_id)
        held.watcher = asyncio.create_task(self._watch(held))
        self._changed(held)
        return receipt_of(task)

    def _changed(self, held: _Held) -> None:
        if self.on_change is not None:
            self.on_change(replace(held.task), list(held.updates))

    async def _foreground(self, held: _Held) -> str:
        """The outcome of an operation that ended within the foreground timeout."""
        out = await self._outcome(held)
        if out.status == "completed":
            return render_output(out.output)
        if out.status == "lost":
            raise HostFailure(out.error or "its worker was lost")
        if out.status == "waiting_input":  # a question in the foreground: a waiting task
            self.held[held.task.id] = held
            await self._ended(held, out)
            return receipt_of(held.task)
        raise RuntimeError(out.error or out.status)

    def _start(self, held: _Held, inp: BackgroundInput) -> None:
        options = self.app.options
        bt = held.tool
        held.starts += 1
        inp.workflow_id = workflow.info().workflow_id
        limited = bt.side_effects and not bt.replayable and not bt.recoverable
        timeout = options.tool_timeout
        if bt.invocation_timeout is not None:
            # Room for the workflow's own cancel at the limit to reach the operation.
            timeout = timedelta(seconds=bt.invocation_timeout) + 3 * options.heartbeat_timeout
        held.handle = workflow.start_activity(
            ACTIVITY_BACKGROUND,
            inp,
            result_type=BackgroundOutcome,
            activity_id=f"background:{inp.call_id}:{held.starts}",
            start_to_close_timeout=timeout,
            heartbeat_timeout=options.heartbeat_timeout,
            retry_policy=RetryPolicy(
                maximum_attempts=1 if limited else options.tool_attempts,
                initial_interval=options.retry_interval,
            ),
            # A cancelled task ends when its operation was stopped, not before.
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"{bt.name} {inp.call_id} (background)",
        )

    async def _outcome(self, held: _Held) -> BackgroundOutcome:
        """How the held activity ended, in the words of a task's outcome."""
        bt = held.tool
        try:
            out: BackgroundOutcome = await held.handle
        except ActivityError as exc:
            cause = exc.cause if exc.cause is not None else exc
            # Cancelled by the workflow: how it ended (a cancel, or its own timeout first,
            # since heartbeats carry the cancel at most every 0.8 heartbeat timeouts) is moot.
            if isinstance(cause, CancelledError) or held.late or held.task.cancel_requested:
                why = "cancelled"
                if held.late:
                    why = f"did not finish within {bt.invocation_timeout} s"
                return BackgroundOutcome(status="cancelled", error=why)
            return BackgroundOutcome(
                status="lost",
                error=f"its worker was lost or failed ({type(cause).__name__}: {cause})",
            )
        return out

    async def _watch(self, held: _Held) -> None:
        bt = held.tool
        if bt.invocation_timeout is not None and held.task.created_at is not None:
            deadline = held.task.created_at + timedelta(seconds=bt.invocation_timeout)
            left = (deadline - workflow.now()).total_seconds()
            try:
                await workflow.wait_condition(held.handle.done, timeout=max(left, 0.001))
            except TimeoutError:
                held.late = True
                held.handle.cancel()
        await self._ended(held, await self._outcome(held))

    async def _ended(self, held: _Held, out: BackgroundOutcome) -> None:
        task = held.task
        task.updated_at = workflow.now()
        if out.status == "waiting_input":
            task.status = "waiting_input"
            task.input = from_plain(out.input, TaskInput)
            if out.checkpoint is not None:
                task.checkpoint = out.checkpoint
            self._changed(held)
            self.wake()
            return
        bt = held.tool
        if out.status == "lost":  # settled by the tool's traits, as the built-in engine does
            task.status = "failed"
            task.needs_review, task.error = lost_verdict(bt)
        elif out.status == "completed":
            task.status, task.output = "completed", out.output
        else:
            task.status = "cancelled" if out.status == "cancelled" else "failed"
            task.error = out.error or out.status
        await self.store.append(task.run_id, ending_message(task))
        task.notified = True
        if self.on_end is not None:
            self.on_end(replace(task), list(held.updates))
        self.wake()

    # -- recovery -------------------------------------------------------------------------------

    def recovery_source(self) -> _HeldSource:
        """What ``TaskManager.recovery()`` reads in this workflow: its tasks, not a store's."""
        return _HeldSource(self)

    # -- continue-as-new ------------------------------------------------------------------------

    def carried(self) -> list[dict[str, Any]]:
        """The tasks that ended, as plain data for the continued workflow run."""
        return [to_plain(h.task, Task) for h in self.held.values() if h.task.final]

    def carried_updates(self, last: int) -> dict[str, list[dict[str, Any]]]:
        """The last ``last`` updates of the tasks that ended, as plain data, by task id."""
        return {
            task_id: [to_plain(u, Update) for u in h.updates[-last:]]
            for task_id, h in self.held.items()
            if h.task.final and h.updates
        }

    def restore(
        self, tasks: list[dict[str, Any]], updates: dict[str, list[dict[str, Any]]] | None = None
    ) -> None:
        """Hold the ended tasks a new workflow run was given, with their last updates."""
        for plain in tasks:
            task = from_plain(plain, Task)
            bt = self.app.background.get(task.tool)
            if bt is not None and task.id not in self.held:
                kept = [from_plain(u, Update) for u in (updates or {}).get(task.id, [])]
                held = _Held(task=task, tool=bt)
                held.updates, held.seen = keep_updates([], frozenset(), kept, _KEPT_UPDATES)
                self.held[task.id] = held

    # -- progress -----------------------------------------------------------------------------

    def add_updates(self, signal: TaskUpdates) -> None:
        """Keep a task's signalled updates, each event id once, in order."""
        held = self.held.get(signal.task_id) or self.foreground.get(signal.task_id)
        if held is None:
            return  # a task this workflow run does not hold (continued as new since)
        valid = []
        for plain in signal.updates:
            update = from_plain(plain, Update)
            try:
                check_update(update)
            except UsageError as exc:
                workflow.logger.warning("task %s: update dropped: %s", signal.task_id, exc)
                continue
            valid.append(update)
        held.updates, held.seen = keep_updates(held.updates, held.seen, valid, _KEPT_UPDATES)

    # -- TaskControls: what the task tools do -------------------------------------------------

    async def task_tool(self, name: str, args: dict[str, Any], run_id: str) -> str:
        """Answer the task tool ``name`` from the tasks held here.

        No ``Tool`` objects are made here: making them parses docstrings, which imports
        modules the sandbox would import afresh for every workflow run.
        """
        return await answer_task_tool(self, name, str(args.get("task_id", "")), run_id)

    async def status(self, task_id: str) -> Task:
        """A task; ``UsageError`` for an unknown id."""
        held = self.held.get(task_id)
        if held is None:
            raise UsageError(f"there is no task {task_id!r}")
        return replace(held.task)

    async def progress(self, task_id: str, last: int = 20) -> str:
        """The task's recent updates, formatted for the model."""
        task = await self.status(task_id)
        return render_progress(task, self.held[task_id].updates[-last:])

    async def cancel(self, task_id: str) -> Task:
        """Cancel a task: its activity is cancelled, which stops the operation."""
        task = await self.status(task_id)
        held = self.held[task_id]
        held.task.cancel_requested = True
        if task.final:
            return task
        if held.handle is not None and not held.handle.done():
            held.handle.cancel()
        elif task.status == "waiting_input":  # no operation runs: it ends here
            await self._ended(held, BackgroundOutcome(status="cancelled", error="cancelled"))
        return task

    def cancel_all(self) -> None:
        """Cancel every running task's activity (the run is being cancelled)."""
        for held in [*self.held.values(), *self.foreground.values()]:
            if held.handle is not None and not held.handle.done():
                held.handle.cancel()

    async def ended_all(self) -> None:
        """Wait until every adopted task ended (after ``cancel_all``: cancelled).

        A task waiting for an answer runs no operation: it ends cancelled here.
        """
        for held in list(self.held.values()):
            if held.task.status == "waiting_input" and not held.task.final:
                held.task.cancel_requested = True
                await self._ended(held, BackgroundOutcome(status="cancelled", error="cancelled"))
        watchers = [h.watcher for h in self.held.values() if h.watcher is not None]
        await asyncio.gather(*watchers, return_exceptions=True)

    # -- questions ------------------------------------------------------------------------------

    def questions(self) -> list[PendingItem]:
        """The tasks' unanswered questions, as ``Runtime.pending`` lists them."""
        items = []
        for held in self.held.values():
            task, question = held.task, held.task.input
            if task.status != "waiting_input" or question is None or question.answered:
                continue
            items.append(question_item(task, question))
        return items

    def asked(self, wait_id: str, response: Any) -> _Held | None:
        """The task that asked on ``wait_id`` (``None``: none); raises for an answer unfit."""
        for held in self.held.values():
            question = held.task.input
            if question is None or question.wait_id != wait_id:
                continue
            if not question.answered:
                check_answer(question, response)
            return held
        return None

    def answer(self, held: _Held, response: Any, by: str | None = None) -> None:
        """Hand the answer to the task once: its operation resumes in a new activity.

        ``by`` names who answered, kept with the question as the built-in engine keeps it.
        """
        task, question = held.task, held.task.input
        assert question is not None
        if question.answered or task.final:
            return  # a repeat (the first answer stands), or the task was cancelled meanwhile
        question.answer, question.answered, question.answered_by = response, True, by
        task.status, task.updated_at = "running", workflow.now()
        self._start(
            held,
            BackgroundInput(
                run_id=task.run_id,
                call_id=task.call_id,
                name=task.tool,
                arguments=task.arguments,
                checkpoint=task.checkpoint,
                wait_id=question.wait_id,
                answer=response,
            ),
        )
        held.watcher = asyncio.create_task(self._watch(held))
        self._changed(held)


class _HeldStore:
    """The one ``TaskStore`` read recovery makes (``get``), answered from the held tasks."""

    def __init__(self, tasks: WorkflowTasks) -> None:
        self.tasks = tasks

    async def get(self, task_id: str) -> Task | None:
        held = self.tasks.held.get(task_id)
        return None if held is None else replace(held.task)


class _HeldSource:
    """A ``TaskSource`` over the workflow's tasks (deterministic, unlike a worker's store)."""

    def __init__(self, tasks: WorkflowTasks) -> None:
        self.store = _HeldStore(tasks)
        self.by_name = tasks.app.background
