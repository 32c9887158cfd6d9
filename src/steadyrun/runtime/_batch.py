"""Scheduling one batch of tool calls by concurrency class.

Rules: at most ``max_concurrent`` calls run at once; a call whose tool declares no concurrency
runs alone (nothing before it is still running, nothing after it starts until it ends); calls
with the same non-empty key never overlap. Calls start in call order where the rules allow, and
a call blocked only by its key lets later calls of other keys go first. Before each start the
run's feed is checked: once new input is waiting, calls that have not started are cancelled,
except calls a person cleared (approved, or answered) on this resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from steadyrun.runtime._calls import CallRunner, Runnable

__all__ = ["BatchRunner"]


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
        keys: set[str] = set()
        alone = False
        superseded = False
        try:
            while queue or tasks:
                i = 0
                while i < len(queue) and not alone and len(tasks) < self.max_concurrent:
                    item = queue[i]
                    # Runs alone: wait until everything before it ended. (Skipping past a
                    # call, i > 0, happens only while a call holding its key runs, so
                    # ``tasks`` covers that case too.)
                    if item.key is None and tasks:
                        break
                    if item.key and item.key in keys:
                        i += 1
                        continue
                    if not superseded and await self.input_pending():
                        superseded = True
                        # Calls a person cleared (approved, answered) still run.
                        for waiting in [q for q in queue if not _cleared(q)]:
                            queue.remove(waiting)
                            await self.calls.cancel(waiting.record)
                        i = 0
                        continue
                    queue.pop(i)
                    if item.key is None:
                        alone = True
                    elif item.key:
                        keys.add(item.key)
                    tasks[asyncio.create_task(self.calls.execute(item))] = item
                if not tasks:
                    continue
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    item = tasks.pop(task)
                    if item.key is None:
                        alone = False
                    elif item.key:
                        keys.discard(item.key)
                    task.result()  # a store failure while recording propagates
        finally:
            # The run is being dropped (crash, cancellation, store failure): stop the calls
            # without recording anything, as a killed process would.
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)


def _cleared(item: Runnable) -> bool:
    record = item.record
    answered = record.input_request is not None and record.input_request.response is not None
    return record.decision is not None or answered
