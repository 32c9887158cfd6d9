"""What a background task is: its record, outcome, input request and progress updates."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from steadyrun._errors import UsageError

__all__ = [
    "MAX_UPDATE_DATA",
    "MAX_UPDATE_KIND",
    "MAX_UPDATE_META_ENTRIES",
    "MAX_UPDATE_META_VALUE",
    "TASK_FORMAT",
    "Outcome",
    "Task",
    "TaskInput",
    "TaskStatus",
    "Update",
    "check_update",
    "ending_of",
    "receipt_of",
    "render_output",
    "task_id_of",
]

TASK_FORMAT = 1
"""Version of the stored task format. History: 1: first format (``TaskInput.answered_by``
added later, optional: documents without it read as ``None``)."""

TaskStatus = Literal["running", "waiting_input", "completed", "failed", "cancelled"]
"""A task's status; ``completed``, ``failed`` and ``cancelled`` are final."""

FINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

MAX_UPDATE_DATA = 256 * 1024
"""Bytes of an update's data."""
MAX_UPDATE_KIND = 128
"""Bytes of an update's kind."""
MAX_UPDATE_META_ENTRIES = 32
"""Entries of an update's metadata."""
MAX_UPDATE_META_VALUE = 1024
"""Bytes of each metadata key and value."""


@dataclass(kw_only=True, slots=True)
class TaskInput:
    """A question a resumable task waits on.

    Attributes:
        wait_id: Identifies the question; stable across recovery; answers name it.
        prompt: What to ask.
        response_schema: JSON schema the answer must satisfy.
        answer: The answer, once given (given once: a second answer is refused).
        answered: Whether the answer was given.
        answered_by: Who gave it, when the host said (``Runtime.answer(..., by=...)``).
    """

    wait_id: str
    prompt: str
    response_schema: dict[str, Any] | None = None
    answer: Any = None
    answered: bool = False
    answered_by: str | None = None


@dataclass(kw_only=True, slots=True)
class Outcome:
    """How one attempt of an operation ended (or paused).

    Attributes:
        status: ``completed``, ``failed``, ``cancelled`` or ``waiting_input``.
        output: The result of a completed operation (JSON data).
        error: Why it failed (or was cancelled).
        input: The question of a task waiting for input.
        checkpoint: For ``waiting_input``: replaces the task's checkpoint when not ``None``.
    """

    status: Literal["completed", "failed", "cancelled", "waiting_input"]
    output: Any = None
    error: str | None = None
    input: TaskInput | None = None
    checkpoint: Any = None

    def __post_init__(self) -> None:
        if self.status == "failed" and not self.error:
            raise UsageError("a failed outcome needs an error")
        if self.status == "waiting_input" and self.input is None:
            raise UsageError("a waiting_input outcome needs an input request")
        if self.status != "waiting_input" and (self.input is not None or self.checkpoint):
            raise UsageError("only a waiting_input outcome carries an input or a checkpoint")


@dataclass(kw_only=True, slots=True)
class Update:
    """One progress event of a task, bounded in size, deduplicated by ``event_id``.

    Attributes:
        event_id: Stable for the task's lifetime: a recovered operation that replays its
            updates sends the same ids, and repeats are dropped.
        kind: What the update is (``log``, ``progress``...).
        data: The content.
        metadata: Small key/value extras.
    """

    event_id: str
    kind: str = "log"
    data: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


def check_update(update: Update) -> None:
    """Raise ``UsageError`` for an update over the limits (or without an event id)."""
    problems = []
    if not update.event_id:
        problems.append("event_id must not be empty")
    if len(update.kind.encode()) > MAX_UPDATE_KIND:
        problems.append(f"kind is over {MAX_UPDATE_KIND} bytes")
    if len(update.data.encode()) > MAX_UPDATE_DATA:
        problems.append(f"data is over {MAX_UPDATE_DATA} bytes")
    if len(update.metadata) > MAX_UPDATE_META_ENTRIES:
        problems.append(f"metadata has over {MAX_UPDATE_META_ENTRIES} entries")
    for k, v in update.metadata.items():
        if len(k.encode()) > MAX_UPDATE_META_VALUE or len(v.encode()) > MAX_UPDATE_META_VALUE:
            problems.append(f"metadata entry {k[:40]!r} is over {MAX_UPDATE_META_VALUE} bytes")
    if problems:
        raise UsageError("invalid task update: " + "; ".join(problems))


@dataclass(kw_only=True, slots=True)
class Task:
    """The durable record of one background task.

    Attributes:
        id: The task id (``<run id>/<call id>`` for a task a tool call started).
        run_id: The run to notify when the task ends.
        call_id: The call that started it.
        tool: The background tool's name.
        arguments: The arguments (JSON text) the operation started with.
        description: What the task does, for people and the model.
        status: See ``TaskStatus``.
        attempt: 0 while a foreground call owns the operation; each worker attempt adds one.
        checkpoint: The tool's own state for recovering the operation (JSON data).
        output: The result, once completed.
        error: Why it failed or was cancelled.
        input: The question while ``waiting_input``.
        owner: The worker holding the lease, if any.
        lease_until: When the owner's lease expires.
        cancel_requested: Cancellation was asked for; the owner stops the operation.
        started: The operation was (or was about to be) started: a later attempt recovers it
            rather than starting it again.
        needs_review: A plain task lost with its worker whose side effects are unknown.
        notified: The run was told the task ended.
        created_at: When the task was created.
        updated_at: Its last change.
    """

    id: str
    run_id: str
    call_id: str
    tool: str
    arguments: str
    description: str = ""
    status: TaskStatus = "running"
    attempt: int = 0
    checkpoint: Any = None
    output: Any = None
    error: str | None = None
    input: TaskInput | None = None
    owner: str | None = None
    lease_until: datetime | None = None
    cancel_requested: bool = False
    started: bool = False
    needs_review: bool = False
    notified: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def final(self) -> bool:
        """Whether the task ended (completed, failed or cancelled)."""
        return self.status in FINAL


def task_id_of(run_id: str, call_id: str) -> str:
    """The id of the task a tool call starts (stable: a repeated call finds its task)."""
    return f"{run_id}/{call_id}"


def receipt_of(task: Task) -> str:
    """The launch receipt the model gets for a task."""
    return json.dumps(
        {
            "task_id": task.id,
            "description": task.description,
            "status": task.status,
            "note": "This runs in the background; you will be told when it ends. "
            "Use task_status, task_output or cancel_task with this task_id.",
        }
    )


def render_output(output: Any) -> str:
    """A task's output as the model reads it (text as is, other data as JSON)."""
    return output if isinstance(output, str) else json.dumps(output, default=str)


def ending_of(task: Task) -> str:
    """The notification the run gets when its task ended (every engine sends the same)."""
    if task.status == "completed":
        return (
            f"Background task {task.id} ({task.description}) completed:\n"
            f"{render_output(task.output)}"
        )
    if task.status == "cancelled":
        return f"Background task {task.id} ({task.description}) was cancelled: {task.error}"
    return f"Background task {task.id} ({task.description}) failed: {task.error}"
