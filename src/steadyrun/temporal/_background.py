"""Background tools on Temporal, the activity side: one operation per ``steadyrun.background``.

On the built-in engine a ``TaskManager`` adopts a long call into a durable task of its own
store. On Temporal the durable task is the activity, owned by the run's workflow
(``WorkflowTasks``): the activity starts the tool's operation (or resumes it with an answer),
heartbeats its ``checkpoint`` while it waits, signals the workflow its progress updates, and
returns how the operation ended. With the app's task tables (``task_records``), it also writes
each update there as it heartbeats, once the workflow recorded the task (adopted): the store
shows a task's progress as it comes, as on the built-in engine. A worker lost mid-operation
is noticed by the heartbeat timeout; the next attempt (on any worker) re-attaches through the
tool's ``recover`` from the last heartbeat's checkpoint, so the operation never starts twice.
A tool without ``recover`` gets one attempt when it has side effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from steadyrun._codec import to_plain
from steadyrun._errors import UsageError
from steadyrun.background import (
    BackgroundTool,
    Materializer,
    Outcome,
    TaskRef,
    TaskStore,
    Update,
    task_id_of,
)
from steadyrun.background._model import check_update
from steadyrun.temporal._taskrecords import store_updates

__all__ = [
    "ACTIVITY_BACKGROUND",
    "SIGNAL_TASK_UPDATES",
    "BackgroundInput",
    "BackgroundOutcome",
    "TaskUpdates",
    "run_operation",
]

ACTIVITY_BACKGROUND = "steadyrun.background"
SIGNAL_TASK_UPDATES = "task_updates"

log = logging.getLogger("steadyrun.temporal")


@dataclass(kw_only=True)
class BackgroundInput:
    """One attempt series of a background operation, run by the ``steadyrun.background`` activity.

    Attributes:
        run_id: The run.
        call_id: The record id (the task id is ``<run_id>/<call_id>``).
        name: The background tool.
        arguments: The validated, prepared arguments (JSON text).
        workflow_id: The workflow to signal progress updates to.
        checkpoint: The task's checkpoint when the operation resumes with an answer.
        wait_id: The question answered (``None``: start the operation).
        answer: The answer.
    """

    run_id: str
    call_id: str
    name: str
    arguments: str
    workflow_id: str = ""
    checkpoint: Any = None
    wait_id: str | None = None
    answer: Any = None


@dataclass(kw_only=True)
class BackgroundOutcome:
    """How an operation ended (or paused), as plain data for the workflow.

    Attributes:
        status: ``completed``, ``failed``, ``cancelled``, ``waiting_input`` or ``lost`` (its
            worker was lost and the tool cannot re-attach: settled by its traits).
        output: The output of a completed operation (JSON data).
        error: Why it failed.
        input: The question of a waiting operation (``TaskInput`` plain data).
        checkpoint: The checkpoint to resume a waiting operation from.
    """

    status: str
    output: Any = None
    error: str | None = None
    input: dict[str, Any] | None = None
    checkpoint: Any = None


@dataclass(kw_only=True)
class TaskUpdates:
    """Progress updates of a task, signalled to its run's workflow (``Update`` plain data)."""

    task_id: str
    updates: list[dict[str, Any]] = field(default_factory=list)


async def run_operation(
    tool: BackgroundTool,
    inp: BackgroundInput,
    heartbeat_every: float,
    output: Materializer | None = None,
    records: TaskStore | None = None,
) -> BackgroundOutcome:
    """In the activity: start, resume or (on a later attempt) recover the operation; wait.

    With ``output``, each progress update is also written to the task's file there; with
    ``records`` (the app's task tables), to the task's record once the workflow wrote it.
    """
    args = tool.Args.model_validate_json(inp.arguments or "{}")
    info = activity.info()
    task_id = task_id_of(inp.run_id, inp.call_id)
    task = TaskRef(task_id=task_id, attempt=info.attempt, run_id=inp.run_id)
    details = list(info.heartbeat_details)
    if details and tool.recoverable:
        op = await tool.recover(task, args, details[0])
    elif info.attempt > 1 and tool.side_effects and not tool.recoverable:
        return BackgroundOutcome(
            status="lost", error="its worker was lost and the tool cannot re-attach to it"
        )
    elif inp.wait_id is not None:
        op = await tool.resume(task, args, inp.checkpoint, inp.wait_id, inp.answer)
    else:
        op = await tool.start(task, args)
    buffered: list[Update] = []
    unstored: list[Update] = []  # not yet in the task tables
    source = op.updates()
    pump = (
        None
        if source is None
        else asyncio.ensure_future(
            _drain(source, [buffered, unstored] if records else [buffered], task_id, output)
        )
    )

    async def store() -> None:
        if records is None or not unstored:
            return
        batch = list(unstored)
        try:
            if await store_updates(records, task_id, batch):
                del unstored[: len(batch)]
        except Exception as exc:  # kept for the next beat: progress is not the outcome
            log.warning("task %s: progress not recorded: %s", task_id, exc)

    async def beat() -> None:
        while True:
            activity.heartbeat(op.checkpoint)
            try:
                await _send_updates(inp, task_id, buffered)
            except Exception as exc:  # kept for the next beat: progress is not the outcome
                log.warning("task %s: progress not signalled: %s", task_id, exc)
            await store()
            await asyncio.sleep(heartbeat_every)

    beating = asyncio.create_task(beat())
    try:
        value = await op.wait()
    except asyncio.CancelledError:
        await op.stop()  # the task (or its run) was cancelled: stop the operation too
        raise
    except Exception as exc:
        return BackgroundOutcome(status="failed", error=_describe(exc))
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
        if pump is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), heartbeat_every)
            pump.cancel()
    with contextlib.suppress(Exception):  # the workflow may have moved on; the outcome counts
        await _send_updates(inp, task_id, buffered)
    await store()  # an ended task's record also carries its last updates, for the rest
    return _outcome(value)


def _outcome(value: Any) -> BackgroundOutcome:
    outcome = value if isinstance(value, Outcome) else Outcome(status="completed", output=value)
    if outcome.status == "completed":
        # As JSON data (what the built-in task store keeps).
        plain = json.loads(json.dumps(outcome.output, default=str))
        return BackgroundOutcome(status="completed", output=plain)
    if outcome.status == "waiting_input":
        assert outcome.input is not None
        return BackgroundOutcome(
            status="waiting_input",
            input=to_plain(outcome.input),
            checkpoint=outcome.checkpoint,
        )
    return BackgroundOutcome(status=outcome.status, error=outcome.error or outcome.status)


async def _drain(
    source: Any, buffers: list[list[Update]], task_id: str, output: Materializer | None
) -> None:
    async for update in source:
        for buffered in buffers:
            buffered.append(update)
        if output is None:
            continue
        try:
            # Only what the workflow keeps (an update over the limits is dropped there).
            check_update(update)
            await output.append(task_id, update)
        except (UsageError, OSError) as exc:  # a view of the progress: it fails no task
            log.warning("update %r not written to %s: %s", update.event_id, output.folder, exc)


async def _send_updates(inp: BackgroundInput, task_id: str, buffered: list[Update]) -> None:
    """Signal the buffered updates to the workflow (which drops repeats by event id)."""
    if not buffered or not inp.workflow_id:
        return
    batch = list(buffered)
    plain = [to_plain(u) for u in batch]
    handle = activity.client().get_workflow_handle(inp.workflow_id)
    await handle.signal(SIGNAL_TASK_UPDATES, TaskUpdates(task_id=task_id, updates=plain))
    del buffered[: len(batch)]


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
