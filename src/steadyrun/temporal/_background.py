"""Background tools on Temporal: a ``BackgroundTool`` call as a heartbeating activity.

On the built-in engine a ``TaskManager`` adopts a long call into a durable task of its own
store. On Temporal the durable task is the activity: the ``steadyrun.background`` activity
starts the tool's operation, heartbeats its ``checkpoint`` while it waits, and returns how it
ended. A worker lost mid-operation is noticed by the heartbeat timeout; the next attempt (on
any worker) re-attaches through the tool's ``recover`` from the last heartbeat's checkpoint,
so the operation never starts twice. A tool without ``recover`` gets one attempt when it has
side effects (a lost attempt settles the call by its traits, as for other tools). The run
learns the end as the call's result. Register the tools with ``TemporalApp(background=...)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    import pydantic

    from steadyrun.background import BackgroundTool, Outcome, TaskRef, task_id_of
    from steadyrun.control import HostFailure
    from steadyrun.runtime._extension import ToolCall
    from steadyrun.temporal._outcomes import outcome_value
    from steadyrun.temporal._payloads import ToolOutcome

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = ["ACTIVITY_BACKGROUND", "BackgroundInput", "run_background", "run_operation"]

ACTIVITY_BACKGROUND = "steadyrun.background"


@dataclass(kw_only=True)
class BackgroundInput:
    """One ``BackgroundTool`` call, run by the ``steadyrun.background`` activity.

    Attributes:
        run_id: The run.
        call_id: The record id (the task id is ``<run_id>/<call_id>``).
        name: The background tool.
        arguments: The raw argument JSON.
    """

    run_id: str
    call_id: str
    name: str
    arguments: str


async def run_background(app: AppView, tool: BackgroundTool, call: ToolCall) -> Any:
    """In the workflow: run the call's operation as an activity and wait for its outcome.

    Returns what the workflow's ``CallRunner`` expects of a body (a rendered result) or raises
    (a failure, ``HostFailure`` when the activity itself was lost for good).
    """
    options = app.options
    limited = tool.side_effects and not tool.replayable and not tool.recoverable
    timeout = options.tool_timeout
    if tool.invocation_timeout is not None:
        timeout = timedelta(seconds=tool.invocation_timeout) + options.heartbeat_timeout
    record = call.record
    try:
        out = await workflow.execute_activity(
            ACTIVITY_BACKGROUND,
            BackgroundInput(
                run_id=call.context.run_id,
                call_id=record.id,
                name=tool.name,
                arguments=record.arguments,
            ),
            result_type=ToolOutcome,
            activity_id=f"background:{record.id}:{record.rev}",
            start_to_close_timeout=timeout,
            heartbeat_timeout=options.heartbeat_timeout,
            retry_policy=RetryPolicy(
                maximum_attempts=1 if limited else options.tool_attempts,
                initial_interval=options.retry_interval,
            ),
            summary=f"{tool.name} {record.id} (background)",
        )
    except ActivityError as exc:
        cause = exc.cause if exc.cause is not None else exc
        if isinstance(cause, CancelledError):
            raise asyncio.CancelledError() from None
        raise HostFailure(
            f"its worker was lost or failed ({type(cause).__name__}: {cause}); "
            f"{'it could not be recovered' if limited else 'retries ran out'}"
        ) from None
    return outcome_value(out)


async def run_operation(
    tool: BackgroundTool, inp: BackgroundInput, heartbeat_every: float
) -> ToolOutcome:
    """In the activity: start (or, on a later attempt, recover) the operation and wait for it."""
    arguments = json.loads(inp.arguments or "{}")
    if tool.background_argument:
        arguments.pop(tool.background_argument, None)
    try:
        args = await tool.prepare_input(tool.Args.model_validate(arguments))
    except pydantic.ValidationError as exc:
        return ToolOutcome(kind="error", error_type="ValueError", text=f"invalid arguments: {exc}")
    info = activity.info()
    task = TaskRef(
        task_id=task_id_of(inp.run_id, inp.call_id), attempt=info.attempt, run_id=inp.run_id
    )
    details = list(info.heartbeat_details)
    if details and tool.recoverable:
        op = await tool.recover(task, args, details[0])
    elif info.attempt > 1 and tool.side_effects and not tool.recoverable:
        return ToolOutcome(
            kind="host_failure",
            text="its worker was lost and the tool cannot re-attach to its operation",
        )
    else:
        op = await tool.start(task, args)

    async def beat() -> None:
        while True:
            activity.heartbeat(op.checkpoint)
            await asyncio.sleep(heartbeat_every)

    beating = asyncio.create_task(beat())
    try:
        value = await op.wait()
    except asyncio.CancelledError:
        await op.stop()  # the run (or its workflow) was cancelled: stop the operation too
        raise
    except Exception as exc:
        return ToolOutcome(kind="error", error_type=type(exc).__name__, text=str(exc))
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    outcome = value if isinstance(value, Outcome) else Outcome(status="completed", output=value)
    if outcome.status == "completed":
        out = outcome.output
        text = out if isinstance(out, str) else json.dumps(out, default=str)
        return ToolOutcome(kind="returned", text=text)
    if outcome.status == "waiting_input":
        raise ApplicationError(
            "a background operation waiting for input is not supported on Temporal",
            type="UsageError",
            non_retryable=True,
        )
    return ToolOutcome(
        kind="error", error_type="BackgroundTaskFailed", text=outcome.error or outcome.status
    )
