"""The API's views of runtime values: pending items, run summaries, call records, snapshots."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from steadyrun._codec import to_plain
from steadyrun.background import Task
from steadyrun.records import CallRecord
from steadyrun.runtime import PendingItem
from steadyrun.service._app import App
from steadyrun.service._schemas import CallOut, PendingOut, RunOut, TaskOut, TaskQuestionOut
from steadyrun.stores import RunSummary
from steadyrun.stream import DisplaySnapshot, display_call

__all__ = ["call_out", "pending_out", "run_out", "snapshot_schemas", "task_out"]


def snapshot_schemas() -> dict[str, dict[str, Any]]:
    """The display snapshot's JSON schemas, for the OpenAPI document (it is a dataclass)."""
    ref = "#/components/schemas/{model}"
    snapshot = TypeAdapter(DisplaySnapshot).json_schema(ref_template=ref)
    schemas: dict[str, dict[str, Any]] = snapshot.pop("$defs", {})
    schemas["DisplaySnapshot"] = snapshot
    schemas["SnapshotDocument"] = {
        "title": "SnapshotDocument",
        "description": "A display snapshot as versioned JSON.",
        "type": "object",
        "properties": {
            "format": {"type": "integer", "const": 1},
            "data": {"$ref": "#/components/schemas/DisplaySnapshot"},
        },
        "required": ["format", "data"],
    }
    return schemas


def pending_out(i: PendingItem) -> PendingOut:
    """A pending item as the API shows it."""
    return PendingOut(
        kind=i.kind,
        blocking=i.blocking,
        call_id=i.call_id,
        name=i.name,
        arguments=i.arguments,
        prompt=i.prompt,
        wait_id=i.wait_id,
        response_schema=i.response_schema,
        payload=to_plain(i.payload) if i.payload is not None else None,
    )


def run_out(app: App, r: RunSummary) -> RunOut:
    """A listed run; one executing in this app shows ``running``."""
    return RunOut(
        run_id=r.run_id,
        agent=r.agent,
        status="running" if app.executing(r.run_id) else r.status,
        created_at=r.created_at,
        updated_at=r.updated_at,
        steps=r.steps,
        executing=app.executing(r.run_id),
    )


def call_out(record: CallRecord) -> CallOut:
    """A call record as a display shows it, with who answered or settled it."""
    shown = display_call(record)
    decision = to_plain(shown.decision) if shown.decision is not None else None
    return CallOut(
        id=shown.id,
        name=shown.name,
        arguments=shown.arguments,
        status=shown.status,
        result=shown.result,
        error=shown.error,
        handover=shown.handover,
        decision=decision,
        answered_by=record.input_request.answered_by if record.input_request else None,
        settled_by=record.settled_by,
    )


def task_out(task: Task) -> TaskOut:
    """A background task as the API shows it (the same from either engine)."""
    question = task.input
    return TaskOut(
        id=task.id,
        call_id=task.call_id,
        tool=task.tool,
        description=task.description,
        status=task.status,
        output=to_plain(task.output),
        error=task.error,
        question=None
        if question is None
        else TaskQuestionOut(
            wait_id=question.wait_id,
            prompt=question.prompt,
            answered=question.answered,
            answered_by=question.answered_by,
        ),
        needs_review=task.needs_review,
        created_at=task.created_at,
        updated_at=task.updated_at,
    )
