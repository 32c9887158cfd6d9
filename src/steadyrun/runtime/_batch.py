"""Executing one batch of tool calls: scheduling by concurrency class, and settling each call.

Scheduling rules: at most ``max_concurrent`` calls run at once; a call whose tool declares no
concurrency runs alone (nothing before it is still running, nothing after it starts until it
ends); calls with the same non-empty key never overlap. Calls start in call order where the
rules allow, and a call blocked only by its key lets later calls of other keys go first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from steadyrun._codec import to_plain
from steadyrun._errors import StoreError
from steadyrun.control import AwaitExternal, ControlSignal
from steadyrun.records import CallRecord
from steadyrun.runtime._observers import ObserverSet
from steadyrun.runtime._state import RunState
from steadyrun.runtime._texts import Texts
from steadyrun.stores import Journal
from steadyrun.tools import Tool, ToolArgumentsError, ToolContext, ToolSet

__all__ = ["BatchRunner"]


@dataclass(slots=True)
class _Item:
    record: CallRecord
    tool: Tool
    args: dict[str, Any]
    key: str | None  # None: runs alone


@dataclass(kw_only=True, slots=True)
class BatchRunner:
    """Runs the queued calls of a run's open batch and records every state change."""

    state: RunState
    journal: Journal
    tools: ToolSet
    texts: Texts
    observers: ObserverSet
    clock: Callable[[], datetime]
    input_pending: Callable[[], Awaitable[bool]]
    max_concurrent: int
    deps: Any = None

    async def run(self) -> None:
        """Execute every queued call of the batch; returns when none is running."""
        queue: list[_Item] = []
        for record in self.state.batch_calls():
            if record.status != "queued":
                continue
            item = await self._prepare(record)
            if item is not None:
                queue.append(item)
        tasks: dict[asyncio.Task[None], _Item] = {}
        keys: set[str] = set()
        alone = False
        superseded = False
        try:
            while queue or tasks:
                i = 0
                while i < len(queue) and not alone and len(tasks) < self.max_concurrent:
                    item = queue[i]
                    if item.key is None and (i > 0 or tasks):
                        break  # runs alone: wait until everything before it ended
                    if item.key and item.key in keys:
                        i += 1
                        continue
                    if not superseded and await self.input_pending():
                        superseded = True
                    if superseded:
                        break
                    queue.pop(i)
                    if item.key is None:
                        alone = True
                    elif item.key:
                        keys.add(item.key)
                    tasks[asyncio.create_task(self._execute(item))] = item
                if superseded:
                    for item in queue:
                        await self._cancel(item.record)
                    queue.clear()
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

    async def _prepare(self, record: CallRecord) -> _Item | None:
        tool = self.tools.get(record.name)
        problem: str | None = None
        args: dict[str, Any] = {}
        key: str | None = None
        if tool is None:
            problem = self.texts.unknown_tool.format(
                name=record.name, available=", ".join(self.tools.names) or "none"
            )
        else:
            try:
                args = tool.validate(record.arguments)
                key = tool.schedule(args)
            except ToolArgumentsError as exc:
                problem = self.texts.invalid_arguments.format(name=record.name, error=exc)
            except Exception as exc:  # a concurrency_key function that raised
                problem = self.texts.tool_error.format(name=record.name, error=_describe(exc))
        if problem is not None or tool is None:
            failed = replace(
                record,
                rev=record.rev + 1,
                status="failed",
                error=problem,
                completed_at=self.clock(),
            )
            await self._save(failed)
            return None
        return _Item(record=record, tool=tool, args=args, key=key)

    async def _cancel(self, record: CallRecord) -> None:
        result = self.texts.cancelled.format(
            name=record.name, call_id=record.provider_call_id or record.id
        )
        await self._save(
            replace(
                record,
                rev=record.rev + 1,
                status="cancelled",
                result=result,
                completed_at=self.clock(),
            )
        )

    async def _execute(self, item: _Item) -> None:
        started = replace(
            item.record, rev=item.record.rev + 1, status="running", started_at=self.clock()
        )
        # The start is durable before the body runs: a crash from here on is recovered as
        # interrupted or needs_review, never by running the body again.
        await self._save(started)
        await self.observers.emit("on_tool_start", self.state.run_id, replace(started))
        ctx = ToolContext(
            run_id=self.state.run_id,
            call_id=started.id,
            tool_name=started.name,
            provider_call_id=started.provider_call_id,
            deps=self.deps,
        )
        try:
            value = await item.tool.invoke(item.args, ctx)
            settled = replace(
                started,
                rev=started.rev + 1,
                status="succeeded",
                result=item.tool.render(value),
                completed_at=self.clock(),
            )
        except AwaitExternal as signal:
            try:
                to_plain(signal.payload, Any)
            except StoreError as exc:
                settled = self._failed(started, f"the await payload cannot be stored: {exc}")
            else:
                settled = replace(
                    started,
                    rev=started.rev + 1,
                    status="waiting",
                    handover="await",
                    payload=signal.payload,
                )
        except ControlSignal as signal:
            settled = self._failed(started, f"unsupported control signal {type(signal).__name__}")
        except Exception as exc:
            settled = self._failed(started, _describe(exc))
        await self._save(settled)
        await self.observers.emit("on_tool_settle", self.state.run_id, replace(settled))

    def _failed(self, record: CallRecord, error: str) -> CallRecord:
        return replace(
            record,
            rev=record.rev + 1,
            status="failed",
            error=self.texts.tool_error.format(name=record.name, error=error),
            completed_at=self.clock(),
        )

    async def _save(self, record: CallRecord) -> None:
        await self.journal.save_call(self.state.run_id, record)
        self.state.put_call(record, saved=True)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
