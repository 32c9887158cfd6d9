"""Request and response bodies of the HTTP API (validated by pydantic, shown in OpenAPI)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

__all__ = [
    "AgentList",
    "AnswerRequest",
    "CallOut",
    "CancelOut",
    "DecideRequest",
    "EditIn",
    "ErrorOut",
    "ForkOut",
    "ForkRequest",
    "HistoryOut",
    "HistoryStepOut",
    "InboxItem",
    "InboxList",
    "MessageOut",
    "MessageRequest",
    "PendingList",
    "PendingOut",
    "ResumeOut",
    "RunList",
    "RunOut",
    "SettleRequest",
    "StartOut",
    "StartRequest",
    "TaskList",
    "TaskOut",
    "TaskQuestionOut",
    "WhoOut",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartRequest(_In):
    """Start a run. The same request (same body) for the same run id returns the same run."""

    run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9._:@-]+$",
        description="Your id for the run; a new random id when left out (then not idempotent).",
    )
    agent: str = Field(min_length=1, max_length=200, description="The agent's name.")
    input: str = Field(min_length=1, description="The user's first message.")


class StartOut(BaseModel):
    """The started (or already started) run."""

    run_id: str
    created: bool = Field(description="False when the same request had started it already.")
    status: str


class MessageRequest(_In):
    """Input for a run; it takes it at its next safe point (resumed if need be)."""

    text: str = Field(min_length=1)
    id: str | None = Field(
        default=None, max_length=200, description="Message id, for deduplication of retries."
    )
    revision: str | None = Field(default=None, max_length=100)


class MessageOut(BaseModel):
    """The input as stored in the run's feed (the first one sent, when repeated)."""

    seq: int
    id: str
    revision: str
    by: str | None = Field(default=None, description="Who sent it (a token's principal).")


class DecideRequest(_In):
    """A decision on a call waiting for one."""

    approve: bool
    reason: str | None = Field(default=None, max_length=10_000)
    arguments: dict[str, JsonValue] | None = Field(
        default=None, description="Edited arguments to run the call with (approvals only)."
    )
    decided_by: str | None = Field(
        default=None,
        max_length=200,
        deprecated=True,
        description="Ignored: the decision records the principal of the request's token.",
    )


class AnswerRequest(_In):
    """The answer to an input request; it must fit the request's response schema."""

    response: JsonValue


class SettleRequest(_In):
    """The outcome of a call the host owns: exactly one of ``result`` and ``error``."""

    result: str | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _one(self) -> SettleRequest:
        if (self.result is None) == (self.error is None):
            raise ValueError("give exactly one of result and error")
        return self


class CallOut(BaseModel):
    """A call record, as a display shows it."""

    id: str
    name: str
    arguments: str
    status: str
    result: str | None = None
    error: str | None = None
    handover: str = ""
    decision: dict[str, Any] | None = Field(
        default=None, description="The host's decision, with decided_by and decided_at."
    )
    answered_by: str | None = Field(
        default=None, description="Who answered its input request (a token's principal)."
    )
    settled_by: str | None = Field(
        default=None, description="Who recorded its outcome, when the host settled it."
    )


class PendingOut(BaseModel):
    """Something a run waits for, or that its host owns."""

    kind: Literal["result", "decision", "input", "review", "submission", "detached", "task_input"]
    blocking: bool
    call_id: str
    name: str
    arguments: str
    prompt: str | None = None
    wait_id: str | None = None
    response_schema: dict[str, Any] | None = None
    payload: JsonValue = None


class PendingList(BaseModel):
    """What a run waits for, in call order."""

    items: list[PendingOut]


class TaskQuestionOut(BaseModel):
    """The question a background task waits on (answered at ``.../waits/{wait_id}/answer``)."""

    wait_id: str
    prompt: str
    answered: bool
    answered_by: str | None = None


class TaskOut(BaseModel):
    """One background task of a run."""

    id: str
    call_id: str
    tool: str
    description: str
    status: Literal["running", "waiting_input", "completed", "failed", "cancelled"]
    output: JsonValue = None
    error: str | None = None
    question: TaskQuestionOut | None = None
    needs_review: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None


class TaskList(BaseModel):
    """A run's background tasks, oldest first."""

    tasks: list[TaskOut]


class RunOut(BaseModel):
    """One run of a listing."""

    run_id: str
    agent: str
    status: str
    created_at: datetime | None
    updated_at: datetime | None
    steps: int
    executing: bool = Field(description="Whether it executes in this service now.")


class RunList(BaseModel):
    """Runs by last activity, newest first."""

    runs: list[RunOut]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page."
    )


class InboxItem(BaseModel):
    """Something waiting for a person, with the run it belongs to."""

    run_id: str
    agent: str
    run_status: str
    updated_at: datetime | None
    item: PendingOut


class InboxList(BaseModel):
    """What waits for a person across runs, runs by last activity, newest first."""

    items: list[InboxItem]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last page."
    )


class WhoOut(BaseModel):
    """Who the request's token says the caller is."""

    principal: str


class ResumeOut(BaseModel):
    """A resume request's outcome."""

    run_id: str
    scheduled: bool = Field(description="False when the run executes here already.")


class CancelOut(BaseModel):
    """A cancel request's outcome."""

    run_id: str
    runs: list[str] = Field(
        description="Runs cancelled (the run and its sub-agent runs); a repeat lists them again."
    )
    calls: list[str] = Field(description="Calls settled cancelled, as run:call.")
    by: str | None = Field(default=None, description="Who cancelled the run.")


class ToolCallIn(_In):
    """A tool call the edited model response makes."""

    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class EditIn(_In):
    """What replaces the last message of the step forked from.

    Text alone replaces it keeping its role (the input, or the model's answer); tool calls
    make it the model's response, whose calls the new run then executes.
    """

    text: str = ""
    tool_calls: list[ToolCallIn] = Field(default_factory=list)

    @model_validator(mode="after")
    def _something(self) -> EditIn:
        if not self.text and not self.tool_calls:
            raise ValueError("give text, tool calls or both")
        return self


class ForkRequest(_In):
    """Fork a run at one of its steps (``GET /runs/{id}/history`` lists them)."""

    at: int = Field(ge=1, description="The step to fork from.")
    new_run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9._:@-]+$",
        description="The new run's id; a new random id when left out (then not idempotent).",
    )
    edit: EditIn | None = None
    resume: bool = Field(default=True, description="Whether a worker continues the new run.")


class ForkOut(BaseModel):
    """The new run (or the same fork, made before)."""

    run_id: str
    forked_from: str
    step: int
    created: bool = Field(description="False when the same fork had been made already.")
    status: str


class HistoryMessageOut(BaseModel):
    """A message a step added: its text, the tool calls it asks for, the results it gives."""

    role: str
    text: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    by: str | None = Field(default=None, description="Who sent it, for input messages.")


class HistoryStepOut(BaseModel):
    """One step (safe point) of a run."""

    step: int
    at: datetime | None
    status: str
    phase: str
    turn: int
    model_calls: int
    rewrote: bool = Field(description="It rewrote the context: messages are the whole context.")
    context_length: int
    messages: list[HistoryMessageOut]
    calls: list[dict[str, str]]
    usage: dict[str, int]
    text: str | None = None
    error: str | None = None
    forked_from: dict[str, Any] | None = None


class HistoryOut(BaseModel):
    """A run's steps, oldest first."""

    run_id: str
    steps: list[HistoryStepOut]


class AgentList(BaseModel):
    """The agents this service runs."""

    agents: list[str]


class ErrorOut(BaseModel):
    """Every error response."""

    error: str = Field(description="A stable code: not_found, conflict, invalid, ...")
    message: str
    error_id: str | None = Field(
        default=None, description="For server errors: look it up in the logs."
    )
    details: list[dict[str, Any]] | None = None
