"""Scheduling one batch of tool calls by concurrency class.

Rules (``next_start``, a pure function): at most ``max_concurrent`` calls run at once; a call
whose tool declares no concurrency runs alone (nothing before it is still running, nothing after
it starts until it ends); calls with the same non-empty key never overlap. Calls start in call
order where the rules allow, and a call blocked only by its key lets later calls of other keys go
first. Before each start the run's feed is checked: once new input is waiting, calls that have
not started are cancelled, except calls a person cleared (approved, or answered) on this resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

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
    """Runs the queued calls of a run's open batch."""

    calls: CallRunner
    input_pending: Callable[[], Awaitable[bool]]
    max_concurrent: int

    async def run(self) -> None:
        """Execute every queued call of the batch; returns when none is running."""
        queue: list[Runnable] = []
        for record in self.calls.state.batch_calls():
            if record.status == "queued":
                item = await self.calls.prepare(record)
                if item is not None:
                    queue.append(item)
        tasks: dict[asyncio.Task[None], Runnable] = {}
        superseded = False
        try:
            while queue or tasks:
                while (i := self._next(queue, tasks)) is not None:
                    if not superseded and await self.input_pending():
                        superseded = True
                        # Calls a person cleared (approved, answered) still run.
                        for waiting in [q for q in queue if not _cleared(q)]:
                            queue.remove(waiting)
                            await self.calls.cancel(waiting.record)
                        continue
                    item = queue.pop(i)
                    tasks[asyncio.create_task(self.calls.execute(item))] = item
                if not tasks:
                    continue
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    tasks.pop(task)
                    task.result()  # a store failure while recording propagates
        finally:
            # The run is being dropped (crash, cancellation, store failure): stop the calls
            # without recording anything, as a killed process would.
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    def _next(self, queue: list[Runnable], tasks: dict[asyncio.Task[None], Runnable]) -> int | None:
        running = [item.key for item in tasks.values()]
        return next_start([item.key for item in queue], running, self.max_concurrent)


def _cleared(item: Runnable) -> bool:
    record = item.record
    answered = record.input_request is not None and record.input_request.response is not None
    return record.decision is not None or answered
