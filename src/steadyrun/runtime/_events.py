"""A run as an async iterator of typed events: ``Runtime.stream`` and ``stream_resume``.

The run executes in a task of its own; an observer added to that execution only (through
``_observers.extra_observers``) turns the hooks into events on a bounded queue the iterator
reads. A full queue makes the run wait for its reader (bounded memory, back-pressure); leaving
the iterator early (``break``, an exception, cancellation) cancels the run's task, which is
exactly the crash the runtime is built to survive: nothing is written on the way out, the last
saved step is the resume point, and a model call that was streaming is asked again on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from steadyrun._errors import UsageError
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage
from steadyrun.records import CallRecord
from steadyrun.runtime._observers import Observer, extra_observers
from steadyrun.runtime._result import RunResult

__all__ = [
    "HandoverPending",
    "ModelCallSettled",
    "ModelCallStarted",
    "RunCompleted",
    "RunEvent",
    "RunFailed",
    "RunStarted",
    "RunSuspended",
    "TextDelta",
    "ThinkingDelta",
    "ToolArgumentsDelta",
    "ToolCallSettled",
    "ToolCallStarted",
    "RunStream",
    "UsageReported",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEvent:
    """Base of the events ``Runtime.stream`` yields; every event names its run.

    Attributes:
        run_id: The run the event belongs to.
    """

    run_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(RunEvent):
    """An execution of the run started (a new run, or a resume).

    Attributes:
        agent: The agent's name.
    """

    agent: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCallStarted(RunEvent):
    """A model call is being made.

    Seeing an id again (after a crash and resume) means the earlier attempt was lost: drop the
    fragments held for it.

    Attributes:
        model_call_id: The call's id (``m1``, ``m2``...).
    """

    model_call_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta(RunEvent):
    """A fragment of the text the model is writing.

    Attributes:
        model_call_id: The model call.
        index: The response part it belongs to.
        text: The fragment.
    """

    model_call_id: str
    index: int
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta(RunEvent):
    """A fragment of the model's thinking.

    Attributes:
        model_call_id: The model call.
        index: The response part it belongs to.
        text: The fragment.
    """

    model_call_id: str
    index: int
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolArgumentsDelta(RunEvent):
    """A fragment of a tool call's JSON arguments, as the model types them.

    Attributes:
        model_call_id: The model call.
        index: The response part it belongs to.
        call_id: The provider's id of the tool call (on its first fragment at least).
        name: The tool's name (on its first fragment at least).
        arguments: The fragment of JSON text.
    """

    model_call_id: str
    index: int
    call_id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCallSettled(RunEvent):
    """A model call returned; its response is what the run saves next.

    Attributes:
        model_call_id: The model call.
        response: The whole response (the fragments add up to it).
    """

    model_call_id: str
    response: ModelResponse


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageReported(RunEvent):
    """The usage of one model call.

    Attributes:
        model_call_id: The model call.
        usage: Its tokens.
    """

    model_call_id: str
    usage: Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStarted(RunEvent):
    """A tool call's body starts.

    Attributes:
        call: Its record.
    """

    call: CallRecord


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallSettled(RunEvent):
    """A tool call settled (succeeded, failed, was rejected...).

    Attributes:
        call: Its record.
    """

    call: CallRecord


@dataclass(frozen=True, kw_only=True, slots=True)
class HandoverPending(RunEvent):
    """A tool call was handed to the outside: it waits for a decision, an answer or a result.

    Attributes:
        call: Its record (``status`` and ``handover`` say what it waits for).
    """

    call: CallRecord


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSuspended(RunEvent):
    """The execution ended with the run suspended; resume it when what it waits for is in.

    Attributes:
        result: The run's result.
    """

    result: RunResult


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCompleted(RunEvent):
    """The run answered its turn.

    Attributes:
        text: The final text.
        result: The run's result.
    """

    text: str | None
    result: RunResult


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFailed(RunEvent):
    """The run failed (or was cancelled by the host); ``result.error`` says why.

    Attributes:
        result: The run's result.
    """

    result: RunResult


@dataclass(frozen=True, slots=True)
class _End:
    """The execution ended: with a result, or with the error ``run``/``resume`` raised."""

    result: RunResult | None
    error: BaseException | None = None


class _Sink(Observer):
    """Turns one run's observer hooks into events on the queue (other runs' are skipped)."""

    def __init__(self, run_id: str, queue: asyncio.Queue[RunEvent | _End]) -> None:
        self._run_id = run_id
        self._queue = queue
        self.pending: set[str] = set()

    async def _put(self, run_id: str, event: RunEvent) -> None:
        # A sub-agent's child run shares the parent's observers; its events are not ours.
        if run_id == self._run_id:
            await self._queue.put(event)

    async def on_run_start(self, run_id: str, agent: str) -> None:  # noqa: D102
        await self._put(run_id, RunStarted(run_id=run_id, agent=agent))

    async def on_model_request(  # noqa: D102
        self, run_id: str, model_call_id: str, request: ModelRequest
    ) -> None:
        await self._put(run_id, ModelCallStarted(run_id=run_id, model_call_id=model_call_id))

    async def on_model_delta(  # noqa: D102
        self, run_id: str, model_call_id: str, delta: ResponseDelta
    ) -> None:
        event: RunEvent
        if delta.part == "text":
            event = TextDelta(
                run_id=run_id, model_call_id=model_call_id, index=delta.index, text=delta.text
            )
        elif delta.part == "thinking":
            event = ThinkingDelta(
                run_id=run_id, model_call_id=model_call_id, index=delta.index, text=delta.text
            )
        else:
            event = ToolArgumentsDelta(
                run_id=run_id,
                model_call_id=model_call_id,
                index=delta.index,
                call_id=delta.call_id,
                name=delta.name,
                arguments=delta.arguments,
            )
        await self._put(run_id, event)

    async def on_model_response(  # noqa: D102
        self, run_id: str, model_call_id: str, response: ModelResponse
    ) -> None:
        await self._put(
            run_id, ModelCallSettled(run_id=run_id, model_call_id=model_call_id, response=response)
        )
        await self._put(
            run_id, UsageReported(run_id=run_id, model_call_id=model_call_id, usage=response.usage)
        )

    async def on_tool_start(self, run_id: str, call: CallRecord) -> None:  # noqa: D102
        await self._put(run_id, ToolCallStarted(run_id=run_id, call=call))

    async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:  # noqa: D102
        if call.settled:
            await self._put(run_id, ToolCallSettled(run_id=run_id, call=call))
        elif run_id == self._run_id:  # handed over by its body: it waits for the outside
            self.pending.add(call.id)
            await self._put(run_id, HandoverPending(run_id=run_id, call=call))

    def still_pending(self, result: RunResult) -> list[RunEvent]:
        """``HandoverPending`` for the calls the run waits on that no hook reported.

        A confirmation or a submission asked by a tool's policy is recorded before any body
        runs, with no observer hook; the suspended result lists it.
        """
        waiting = ("waiting", "awaiting_decision", "awaiting_input")
        return [
            HandoverPending(run_id=result.run_id, call=call)
            for call in result.calls
            if call.status in waiting and call.id not in self.pending
        ]


def _ending(result: RunResult) -> RunEvent:
    if result.status == "completed":
        return RunCompleted(run_id=result.run_id, text=result.text, result=result)
    if result.status == "suspended":
        return RunSuspended(run_id=result.run_id, result=result)
    return RunFailed(run_id=result.run_id, result=result)


async def _drive(
    execute: Callable[[], Awaitable[RunResult]],
    sink: _Sink,
    queue: asyncio.Queue[RunEvent | _End],
) -> None:
    """The execution's task: the run under ``sink``, its end (or error) queued last."""
    # Set inside the task: the sink observes this execution and no other.
    extra_observers.set((sink,))
    try:
        result = await execute()
    except Exception as exc:
        await queue.put(_End(None, exc))
    else:
        await queue.put(_End(result))


class RunStream:
    """The events of one execution of a run: an async iterator and an async context manager.

    The run starts executing at the first ``__anext__``. ``aclose()`` (or leaving
    ``async with``) stops an execution that is still going and waits until it has stopped; a
    bare ``break`` drops the iterator, which cancels the execution at once and lets it stop on
    the event loop's next turns. Either way the run stops as a crash would: nothing more is
    saved, and ``resume`` continues it from its last saved step.

    Args:
        execute: Starts the execution (``Runtime.run`` or ``Runtime.resume``, bound).
        run_id: The run; events of other runs (sub-agents) are left out.
        buffer: Events held for a slow reader before the run waits for it.

    Raises:
        UsageError: ``buffer`` is below 1.
    """

    def __init__(
        self, execute: Callable[[], Awaitable[RunResult]], run_id: str, *, buffer: int = 256
    ) -> None:
        if buffer < 1:
            raise UsageError(f"buffer must be at least 1, got {buffer}")
        self.run_id = run_id
        self._execute = execute
        self._queue: asyncio.Queue[RunEvent | _End] = asyncio.Queue(maxsize=buffer)
        self._task: asyncio.Task[None] | None = None
        self._over = False
        self._sink = _Sink(run_id, self._queue)
        self._last: list[RunEvent] = []

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> RunEvent:
        """The next event; the last is ``RunCompleted``, ``RunSuspended`` or ``RunFailed``.

        Raises:
            StopAsyncIteration: After the last event.
            Exception: Whatever ``run``/``resume`` raised (``RunBusyError``, a store failure).
        """
        if self._last:
            return self._last.pop(0)
        if self._over:
            raise StopAsyncIteration
        if self._task is None:
            # The task must not hold this stream: dropping the stream has to reach __del__.
            self._task = asyncio.ensure_future(_drive(self._execute, self._sink, self._queue))
        item = await self._queue.get()
        if not isinstance(item, _End):
            return item
        self._over = True
        if item.error is not None:
            raise item.error
        assert item.result is not None
        if item.result.status == "suspended":
            self._last = self._sink.still_pending(item.result)
        self._last.append(_ending(item.result))
        return self._last.pop(0)

    async def aclose(self) -> None:
        """Stop the execution if it still goes (as a crash would), and wait until it stopped."""
        self._over = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # A reader that broke out without aclose(): stop the execution rather than let it wait
        # forever on a full queue nobody reads.
        task = getattr(self, "_task", None)  # None too when __init__ refused its arguments
        if task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # its event loop closed already
                task.cancel()
