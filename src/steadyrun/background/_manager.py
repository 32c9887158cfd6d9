"""``TaskManager``: background tools in the foreground first, then adopted into durable tasks.

It also works tasks with leases, recovers them after a worker dies, and tells runs when their
tasks end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.background._model import (
    Outcome,
    Task,
    Update,
    receipt_of,
    render_output,
    task_id_of,
)
from steadyrun.background._progress import Materializer, render_progress
from steadyrun.background._recovery import TaskRecovery
from steadyrun.background._shared import (
    check_answer,
    ending_message,
    lost_verdict,
    new_task,
    question_item,
    split_arguments,
)
from steadyrun.background._store import TaskStore
from steadyrun.background._task_tools import task_tools
from steadyrun.background._tool import AdoptionView, BackgroundTool, Operation, TaskRef, outcome_of
from steadyrun.control import HostFailure
from steadyrun.runtime._extension import Extension
from steadyrun.runtime._host import PendingItem
from steadyrun.stores import Feed
from steadyrun.stores._leases import fenced
from steadyrun.tools import Tool, ToolContext, schema_tool

__all__ = ["TaskManager"]

log = logging.getLogger("steadyrun.background")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TaskManager:
    """Background tasks of the runs of one process (a worker), on a ``TaskStore``.

    Args:
        store: Where tasks live (shared by every worker).
        feed: The runs' feed (the run store), where task endings are announced.
        tools: The background tools this worker can run (the same set on every worker).
        owner: This worker's id (default: a random one).
        lease: Seconds a claim lasts; renewed every third of it while the task runs.
        poll: Seconds between looks for claimable tasks (a local submission wakes it at once).
        max_concurrent: Tasks this worker runs at once.
        output_dir: When set, each task's updates are also written to ``<dir>/<task>.jsonl``.
        clock: The current time (UTC).

    Use ``tools()`` for the agent (the background tools and the task tools), and run the
    worker with ``async with manager:`` (or ``start()``/``stop()``).
    """

    def __init__(
        self,
        store: TaskStore,
        feed: Feed,
        tools: Sequence[BackgroundTool],
        *,
        owner: str | None = None,
        lease: float = 30.0,
        poll: float = 1.0,
        max_concurrent: int = 100,
        output_dir: Path | str | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        names = [t.name for t in tools]
        if len(set(names)) != len(names) or not all(names):
            raise UsageError(f"background tools need unique, non-empty names, got {names}")
        self.store = store
        self.feed = feed
        self.by_name = {t.name: t for t in tools}
        self.owner = owner or f"worker-{uuid.uuid4().hex[:8]}"
        self.lease = timedelta(seconds=lease)
        self.poll = poll
        self.max_concurrent = max_concurrent
        self.materializer = Materializer(Path(output_dir)) if output_dir is not None else None
        self.clock = clock
        self._running: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._closing = False

    # -- the model-facing tools --------------------------------------------------------------

    def tool(self, bt: BackgroundTool) -> Tool:
        """The tool the model calls for ``bt`` (it must be one of this manager's tools)."""
        if self.by_name.get(bt.name) is not bt:
            raise UsageError(f"{bt.name!r} is not one of this TaskManager's tools")
        schema = dict(bt.Args.model_json_schema())
        if bt.background_argument:
            props = dict(schema.get("properties", {}))
            props[bt.background_argument] = {
                "type": "boolean",
                "description": "Run in the background at once; check on it with task_status.",
            }
            schema["properties"] = props

        async def call(arguments: dict[str, Any], ctx: ToolContext | None) -> str:
            if ctx is None:
                raise UsageError("background tools run inside a run")
            return await self._call(bt, dict(arguments), ctx)

        return schema_tool(
            bt.name,
            bt.description,
            schema,
            call,
            side_effects=bt.side_effects,
            replayable=bt.replayable,
            concurrency_key="",
        )

    def tools(self) -> list[Tool]:
        """Every background tool, and ``task_status``, ``task_output``, ``cancel_task``."""
        return [*(self.tool(t) for t in self.by_name.values()), *task_tools(self)]

    def recovery(self) -> Extension:
        """An extension recovering this manager's interrupted calls from the task store.

        Give it to the agent (``Agent(extensions=[manager.recovery()])``): a call adopted into
        a task before a crash then gets its receipt instead of needing review, and a call of a
        recoverable tool that died in its foreground wait re-attaches to its operation.
        """
        return TaskRecovery(self)

    # -- foreground first, then adopt --------------------------------------------------------

    async def _call(self, bt: BackgroundTool, arguments: dict[str, Any], ctx: ToolContext) -> str:
        background, args = split_arguments(bt, arguments)
        args = await bt.prepare_input(args)
        task_id = task_id_of(ctx.run_id, ctx.call_id)
        existing = await self.store.get(task_id)
        if existing is not None:  # the call runs again after a crash: never start it twice
            return receipt_of(existing)
        task = new_task(
            bt, args, run_id=ctx.run_id, call_id=ctx.call_id, task_id=task_id, now=self.clock()
        )
        if background:
            stored = await self.store.insert(task)
            self._wake.set()
            return receipt_of(stored)
        op = await bt.start(TaskRef(task_id=task_id, attempt=0, run_id=ctx.run_id), args)
        buffered: list[Update] = []
        pump = _pump(op, buffered)
        waiter = asyncio.ensure_future(op.wait())
        started = asyncio.get_running_loop().time()
        timeout = bt.foreground_timeout
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
        if waiter in done:
            if pump is not None:
                pump.cancel()
            outcome = outcome_of(waiter.result())
            if outcome.status == "completed":
                return render_output(outcome.output)
            if outcome.status != "waiting_input":
                raise RuntimeError(outcome.error or outcome.status)
        else:
            view = AdoptionView(
                task_id=task_id,
                tool=bt.name,
                arguments=task.arguments,
                elapsed=asyncio.get_running_loop().time() - started,
            )
            if not bt.should_adopt(view):
                waiter.cancel()
                if pump is not None:
                    pump.cancel()
                await op.stop()
                raise HostFailure(f"it did not finish within {timeout} s and was stopped")
            outcome = None
        # Adopt: the same operation goes on, owned by this worker, never started again.
        task.started = True
        task.checkpoint = op.checkpoint
        task.owner = self.owner
        task.lease_until = self.clock() + self.lease
        if outcome is not None:  # waiting for input in the foreground: a waiting task
            task.status, task.input, task.owner, task.lease_until = (
                "waiting_input",
                outcome.input,
                None,
                None,
            )
            if outcome.checkpoint is not None:
                task.checkpoint = outcome.checkpoint
        stored = await self.store.insert(task)
        for update in buffered:
            await self._add_update(task_id, update)
        if outcome is None:
            self._spawn(task_id, self._watch(stored, op, waiter, pump, buffered))
        return receipt_of(stored)

    # -- the worker --------------------------------------------------------------------------

    async def __aenter__(self) -> TaskManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start claiming and running tasks in the background of the event loop."""
        if self._loop is None:
            self._closing = False
            self._loop = asyncio.create_task(self._work())

    async def stop(self, *, release: bool = True) -> None:
        """Stop working; tasks in hand stop being watched.

        With ``release``, they go back to the store, so another worker recovers them at once
        rather than after their lease.
        """
        self._closing = True
        self._wake.set()
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None
        running = list(self._running.items())
        for _, job in running:
            job.cancel()
        await asyncio.gather(*(j for _, j in running), return_exceptions=True)
        if release:
            for task_id, _ in running:
                await self.store.release(task_id, self.owner)

    async def _work(self) -> None:
        while not self._closing:
            try:
                await self._announce()
                room = self.max_concurrent - len(self._running)
                if room > 0:
                    for task in await self.store.claim(self.owner, self.clock(), self.lease, room):
                        self._spawn(task.id, self._attempt(task))
            except Exception:
                log.exception("task worker %s: claiming failed; trying again", self.owner)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll)

    def _spawn(self, task_id: str, job: Any) -> None:
        # Outside any run's claim: an adopted call's watcher starts inside the run's execution
        # and would inherit its fence, so the notification would count as the run's own write
        # (no wake-up: no worker would ever resume the run), or be refused once the claim ended.
        with fenced(None):
            runner = asyncio.create_task(job)
        self._running[task_id] = runner
        runner.add_done_callback(lambda _: self._running.pop(task_id, None))

    async def _attempt(self, task: Task) -> None:
        bt = self.by_name.get(task.tool)
        if bt is None:
            await self._finish(task, Outcome(status="failed", error=f"no tool {task.tool!r} here"))
            return
        ref = TaskRef(task_id=task.id, attempt=task.attempt, run_id=task.run_id)
        if task.cancel_requested:
            await self._finish(task, Outcome(status="cancelled", error="cancelled"))
            return
        try:
            args = bt.Args.model_validate_json(task.arguments)
            question = task.input
            if task.status == "waiting_input" and question is not None:
                op = await bt.resume(ref, args, task.checkpoint, question.wait_id, question.answer)
                await self.store.resumed(task.id, self.owner, self.clock())
            elif not task.started or (bt.recoverable and task.checkpoint is None):
                # Marked before it starts: a worker that dies in between leaves a task that is
                # recovered (recoverable tools start idempotently) or reviewed, never re-run.
                await self.store.mark_started(task.id, self.owner)
                op = await bt.start(ref, args)
                await self.store.save_checkpoint(task.id, self.owner, op.checkpoint)
            elif bt.recoverable:
                op = await bt.recover(ref, args, task.checkpoint)
            else:
                await self._lost(task, bt)
                return
        except Exception as exc:
            await self._finish(task, Outcome(status="failed", error=_describe(exc)))
            return
        buffered: list[Update] = []
        await self._watch(task, op, asyncio.ensure_future(op.wait()), _pump(op, buffered), buffered)

    async def _lost(self, task: Task, bt: BackgroundTool) -> None:
        """A plain operation whose worker died: settled by the tool's traits."""
        review, error = lost_verdict(bt)
        await self._finish(task, Outcome(status="failed", error=error), needs_review=review)

    async def _watch(
        self,
        task: Task,
        op: Operation,
        waiter: asyncio.Future[Any],
        pump: asyncio.Task[None] | None,
        buffered: list[Update],
    ) -> None:
        """Own a running operation until it ends.

        Renews the lease, keeps the updates, honours cancellation, records the outcome.
        """
        bt = self.by_name[task.tool]
        deadline = None
        if bt.invocation_timeout is not None and task.created_at is not None:
            deadline = task.created_at + timedelta(seconds=bt.invocation_timeout)
        step = self.lease.total_seconds() / 3
        try:
            while True:
                done, _ = await asyncio.wait({waiter}, timeout=step)
                await self._flush(task.id, buffered)
                if waiter in done:
                    break
                current = await self.store.renew(task.id, self.owner, self.clock() + self.lease)
                if current is None:
                    waiter.cancel()  # another worker owns it now: stop watching, touch nothing
                    return
                late = deadline is not None and self.clock() >= deadline
                if current.cancel_requested or late:
                    await op.stop()
                    waiter.cancel()
                    why = (
                        "cancelled"
                        if not late
                        else f"did not finish within {bt.invocation_timeout} s"
                    )
                    await self._finish(task, Outcome(status="cancelled", error=why))
                    return
            try:
                outcome = outcome_of(waiter.result())
            except Exception as exc:
                outcome = Outcome(status="failed", error=_describe(exc))
            if pump is not None:
                await asyncio.wait({pump}, timeout=step)
            await self._flush(task.id, buffered)
            await self._finish(task, outcome)
        finally:
            if pump is not None:
                pump.cancel()

    async def _finish(self, task: Task, outcome: Outcome, *, needs_review: bool = False) -> None:
        written = await self.store.record(
            task.id, self.owner, self.clock(), outcome, needs_review=needs_review
        )
        if written and outcome.status != "waiting_input":
            await self._announce_one(task.id)

    # -- updates -----------------------------------------------------------------------------

    async def _flush(self, task_id: str, buffered: list[Update]) -> None:
        while buffered:
            await self._add_update(task_id, buffered.pop(0))

    async def _add_update(self, task_id: str, update: Update) -> None:
        try:
            await self.store.add_update(task_id, update)
        except UsageError as exc:
            log.warning("task %s: update %r dropped: %s", task_id, update.event_id, exc)
            return
        if self.materializer is not None:
            await self.materializer.append(task_id, update)

    # -- notifications -----------------------------------------------------------------------

    async def _announce(self) -> None:
        for task_id in await self.store.unnotified(50):
            await self._announce_one(task_id)

    async def _announce_one(self, task_id: str) -> None:
        """Tell the run its task ended, once (the feed drops a repeated message id)."""
        task = await self.store.get(task_id)
        if task is None or not task.final or task.notified:
            return
        await self.feed.append(task.run_id, ending_message(task))
        await self.store.mark_notified(task.id)

    # -- the host's and the model's operations -----------------------------------------------

    async def status(self, task_id: str) -> Task:
        """A task; ``UsageError`` for an unknown id."""
        task = await self.store.get(task_id)
        if task is None:
            raise UsageError(f"there is no task {task_id!r}")
        return task

    async def progress(self, task_id: str, last: int = 20) -> str:
        """The task's recent updates, formatted for the model."""
        return render_progress(await self.status(task_id), await self.store.updates(task_id, last))

    async def cancel(self, task_id: str) -> Task:
        """Ask for a task's cancellation; the worker that owns it stops the operation."""
        task = await self.store.request_cancel(task_id, self.clock())
        if task is None:
            raise UsageError(f"there is no task {task_id!r}")
        job = self._running.get(task_id)
        if job is None and task.final:
            await self._announce_one(task_id)
        self._wake.set()
        return task

    async def pending_inputs(self, run_id: str) -> list[Task]:
        """The run's tasks waiting for an answer."""
        tasks = await self.store.list_tasks(run_id)
        return [
            t for t in tasks if t.status == "waiting_input" and t.input and not t.input.answered
        ]

    async def pending_questions(self, run_id: str) -> list[PendingItem]:
        """The run's tasks' questions as ``Runtime.pending`` lists them (``Runtime.use_tasks``)."""
        items = []
        for task in await self.pending_inputs(run_id):
            assert task.input is not None
            items.append(question_item(task, task.input))
        return items

    async def answer_question(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> str | None:
        """Answer the question of the run's task on ``wait_id`` (``Runtime.answer``).

        ``by`` names who answered.

        Returns:
            The task's call id, or ``None`` when no task of the run asked on ``wait_id``.
        """
        for task in await self.store.list_tasks(run_id):
            if task.input is not None and task.input.wait_id == wait_id:
                await self.answer(task.id, wait_id, response, by=by)
                return task.call_id
        return None

    async def answer(
        self, task_id: str, wait_id: str, answer: Any, *, by: str | None = None
    ) -> bool:
        """Answer a waiting task's question (validated against its schema), exactly once.

        ``by`` names who answered (``TaskInput.answered_by``).

        Returns ``False`` when that question was answered already (the answer is ignored).

        Raises:
            InvalidResponseError: The answer does not fit the question's schema.
            UsageError: No such task, or it does not wait on ``wait_id``.
        """
        task = await self.status(task_id)
        question = task.input
        if question is None or question.wait_id != wait_id:
            raise UsageError(f"task {task_id!r} does not wait on {wait_id!r}")
        if question.answered:
            return False  # a repeat: the first answer stands
        check_answer(question, answer)
        given = await self.store.answer(task_id, wait_id, answer, self.clock(), by=by)
        if given:
            self._wake.set()
        return given


def _pump(op: Operation, buffered: list[Update]) -> asyncio.Task[None] | None:
    source = op.updates()
    if source is None:
        return None

    async def drain() -> None:
        async for update in source:
            buffered.append(update)

    return asyncio.ensure_future(drain())


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
