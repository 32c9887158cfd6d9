"""Scheduling one batch of tool calls by concurrency class.

Rules (``next_start``, a pure function): at most ``max_concurrent`` calls run at once; a call
whose tool declares no concurrency runs alone (nothing before it is still running, nothing after
it starts until it ends); calls with the same non-empty key never overlap. Calls start in call
order where the rules allow, and a call blocked only by its key lets later calls of other keys go
first. Before each round of starts the run's feed is checked (``input_pending``; a batch's first
check takes what the run's last step's commit said): once new input is waiting, calls that have
not started are cancelled, except calls a person cleared (approved, or answered) on this resume.
The calls that may start at once start together: their starts are written in one go (with the
step that opened the batch, when it is still owed) before any of their bodies runs. When that
step's commit finds input waiting (``input_seen``: input that came while the model answered),
the calls it started are cancelled as the others, before any body runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

from steadyrun.records import CallRecord
from steadyrun.runtime._calls import CallRunner, Runnable

__all__ = ["BatchRunner", "next_start"]


def next_start(
    waiting: Sequence[str | None], running: Collection[str | None], max_concurrent: int
) -> int | None:
    """Which waiting call may start now, by the concurrency rules; ``None`` when none may.

    Args:
        waiting: The concurrency keys of the calls not started yet, in call order. ``None``:
            the call runs alone; ``""``: no key, it overlaps anything but a call running alone.
        running: The keys of the calls running now.
        max_concurrent: How many calls may run at once.

    Returns:
        The index in ``waiting`` of the call to start next, or ``None``.
    """
    if len(running) >= max_concurrent or None in running:
        return None  # full, or a call runs alone
    for i, key in enumerate(waiting):
        if key is None:  # runs alone: only once everything before it has ended
            return None if running else i
        if key and key in running:
            continue  # blocked by its key only: later calls of other keys may go first
        return i
    return None


@dataclass(kw_only=True, slots=True)
class BatchRunner:
    """Runs the queued calls of a run's open batch.

    Attributes:
        calls: Prepares, executes and records the calls.
        input_pending: Whether new input waits (it cancels the calls not started).
        max_concurrent: How many calls may run at once.
        save_step: The step the batch opened with, when it is not saved yet: it is saved
            with what the policies decided and the starts of the first calls, in one
            transaction, before any body runs (or at the end, when no call starts).
    """

    calls: CallRunner
    input_pending: Callable[[], Awaitable[bool]]
    max_concurrent: int
    save_step: Callable[[], Awaitable[None]] | None = None
    input_seen: Callable[[], bool] = lambda: False
    """Whether the commit of ``save_step`` just made saw input waiting in the run's feed (a
    store's ``save_step`` may say); nothing is read for it."""

    async def run(self) -> None:
        """Execute every queued call of the batch; returns when none is running."""
        self.calls.owed_step = self.save_step
        try:
            await self._run_all()
            await self.calls.save_owed_step()  # no call started: the step comes now
        finally:
            self.calls.owed_step = None

    async def _run_all(self) -> None:
        queue: list[Runnable] = []
        for record in self.calls.state.batch_calls():
            if record.status == "queued":
                item = await self.calls.prepare(record)
                if item is not None:
                    queue.append(item)
        tasks: dict[asyncio.Task[None], Runnable] = {}
        superseded = False

        def last() -> bool:  # asked by a settling call: nothing else of the batch is left
            return not queue and len(tasks) <= 1

        try:
            while queue or tasks:
                starting: list[Runnable] = []
                if (
                    not superseded
                    and self._next(queue, tasks, starting) is not None
                    and await self.input_pending()
                ):
                    superseded = True
                    # Calls a person cleared (approved, answered) still run.
                    for waiting in [q for q in queue if not _cleared(q)]:
                        queue.remove(waiting)
                        await self.calls.cancel(waiting.record)
                while (i := self._next(queue, tasks, starting)) is not None:
                    starting.append(queue.pop(i))
                if starting:
                    started = [self.calls.begin(item) for item in starting]
                    pairs = list(zip(starting, started, strict=True))
                    if await self._save_starts(started) and not superseded:
                        # The commit of the starts found input that came while the model
                        # answered: no body has run, so the calls go as if never started.
                        superseded = True
                        for waiting in [q for q in queue if not _cleared(q)]:
                            queue.remove(waiting)
                            await self.calls.cancel(waiting.record)
                        for item, record in [p for p in pairs if not _cleared(p[0])]:
                            pairs.remove((item, record))
                            await self.calls.cancel(record)
                    if len(pairs) == 1 and not queue and not tasks and self._alone(pairs[0][0]):
                        # Nothing else of the batch to start or watch, and a body that gets a
                        # copy of the context variables in its thread: a task of its own would
                        # keep nothing apart, and cost a turn of the loop (issue 20).
                        await self.calls.execute(*pairs[0], last)
                        continue
                    for item, record in pairs:
                        task = asyncio.create_task(self.calls.execute(item, record, last))
                        tasks[task] = item
                if not tasks:
                    continue
                if len(tasks) == 1:
                    # One call running (the common batch): its task alone, awaited without
                    # asyncio.wait's waiter and callbacks (half the cost). Its error, if any,
                    # is raised by result() below, as when several run.
                    (task,) = tasks
                    with contextlib.suppress(Exception):
                        await task
                    done = {task}
                else:
                    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    tasks.pop(task)
                    task.result()  # a store failure while recording propagates
        except GeneratorExit:
            # Closed, not cancelled (Temporal evicting a workflow from its cache closes its
            # coroutine): a closed coroutine may not await again, so the calls' tasks are
            # cancelled and left to their loop instead of awaited below.
            for task in tasks:
                task.cancel()
            tasks.clear()
            raise
        finally:
            # The run is being dropped (crash, cancellation, store failure): stop the calls
            # without recording anything, as a killed process would.
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    def _alone(self, item: Runnable) -> bool:
        """Whether the lone call ``item`` may be awaited in the run's own task.

        An async or inline body (or an extension's middleware around any body) runs in the
        awaiting task's context: in the run's, its context variables would outlive the call.
        """
        return self.calls.extensions is None and item.tool.runs_in_thread

    async def _save_starts(self, started: list[CallRecord]) -> bool:
        """Make the starts durable: with the owed step, else together on their own.

        Returns whether the step's commit saw input waiting (``input_seen``; the starts'
        own writes say nothing).
        """
        if self.calls.owed_step is not None:
            await self.calls.save_owed_step()
            return self.input_seen()
        await self.calls.save_starts(started)
        return False

    def _next(
        self,
        queue: list[Runnable],
        tasks: dict[asyncio.Task[None], Runnable],
        starting: list[Runnable],
    ) -> int | None:
        running = [item.key for item in tasks.values()] + [item.key for item in starting]
        return next_start([item.key for item in queue], running, self.max_concurrent)


def _cleared(item: Runnable) -> bool:
    record = item.record
    answered = record.input_request is not None and record.input_request.response is not None
    return record.decision is not None or answered
