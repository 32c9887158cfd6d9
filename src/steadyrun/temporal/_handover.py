"""``on_handover`` on Temporal: the host's hook runs in the ``steadyrun.handover`` activity.

On the built-in engine ``Runtime(on_handover=...)`` is called with the record before a
submission or a pending confirmation is saved; raising ``CallRejected`` refuses the call. The
hook may do I/O (tell a ticket system, check a limit in a database), so on Temporal the
workflow calls it as an activity and gets back whether it refused, and why: the workflow
stays deterministic and the record's next state is decided by steadyrun's own ``CallRunner``.
Another exception fails the attempt; after ``tool_attempts`` the workflow fails, as the
built-in run crashes (``TemporalRuns.resume`` continues it, asking the hook again).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun.control import CallRejected
    from steadyrun.records import CallRecord
    from steadyrun.runtime._calls import HandoverHook

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = [
    "ACTIVITY_HANDOVER",
    "HandoverInput",
    "HandoverOutcome",
    "call_hook",
    "handover_in_activity",
]

ACTIVITY_HANDOVER = "steadyrun.handover"


@dataclass(kw_only=True)
class HandoverInput:
    """One call of the host's ``on_handover`` hook.

    Attributes:
        run_id: The run.
        record: The record about to be saved (``CallRecord`` plain data).
    """

    run_id: str
    record: dict[str, Any]


@dataclass(kw_only=True)
class HandoverOutcome:
    """What the hook said.

    Attributes:
        refused: The ``CallRejected`` reason; ``None`` when the handover may be saved.
    """

    refused: str | None = None


def handover_in_activity(app: AppView) -> HandoverHook | None:
    """In the workflow: the ``on_handover`` hook ``Execution`` calls, as an activity.

    ``None`` when the app has no hook (no activity is scheduled, as before).
    """
    if app.on_handover is None:
        return None
    options = app.options

    async def hook(run_id: str, record: CallRecord) -> None:
        out = await workflow.execute_activity(
            ACTIVITY_HANDOVER,
            HandoverInput(run_id=run_id, record=to_plain(record, CallRecord)),
            result_type=HandoverOutcome,
            activity_id=f"handover:{record.id}:{record.rev}",
            start_to_close_timeout=options.record_timeout,
            heartbeat_timeout=options.heartbeat_timeout,
            retry_policy=RetryPolicy(
                maximum_attempts=options.tool_attempts, initial_interval=options.retry_interval
            ),
            summary=f"on_handover {record.name} {record.id}",
        )
        if out.refused is not None:
            raise CallRejected(out.refused)

    return hook


async def call_hook(hook: HandoverHook, inp: HandoverInput) -> HandoverOutcome:
    """In the activity: call the host's hook (sync or async) and say whether it refused."""
    try:
        outcome = hook(inp.run_id, from_plain(inp.record, CallRecord))
        if inspect.isawaitable(outcome):
            await outcome
    except CallRejected as refusal:
        return HandoverOutcome(refused=refusal.reason)
    return HandoverOutcome()
