"""``RunResult``: what a run returns, and what a reload of a stored run gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from steadyrun._errors import BudgetExceeded, CallNotFoundError, RunFailure
from steadyrun.chat import FinishReason, Message, Usage
from steadyrun.records import Block, CallRecord

__all__ = ["RunResult"]


@dataclass(kw_only=True, slots=True)
class RunResult:
    """The outcome of running (or resuming) a run until it completed, suspended or failed.

    Attributes:
        run_id: The run.
        status: ``completed``, ``suspended`` (waiting for something outside; resume later),
            ``failed`` (see ``error``) or ``cancelled`` (by the host; it does not resume).
        text: The final text of a completed run.
        completion: The structured value of a run completed by a completion tool (or a
            guard's ``Finish``, or a fallback).
        completion_reason: Why a fallback completion was used, when one was.
        finish_reason: How the run's last model response finished (``stop``, ``tool_calls``,
            ``length``, ``content_filter``, ``error``; ``None`` before the first): ``length``
            on a completed run means its text was cut by the output length limit (see
            ``Agent(correct_length_cut=True)``).
        usage: Token usage of the whole run.
        calls: Every call record of the run.
        blocks: The run's process, in model order.
        error: Why the run failed.
        budget_exceeded: The budget that stopped the run, while one stops it (suspended, or
            failed with ``Limits(on_budget="fail")``): raise it and resume.
        messages: The model context at the end.
        observer_errors: Observer callbacks that raised during this execution.
        extensions: What the run's extensions publish, by extension name (the plan, say).
    """

    run_id: str
    status: Literal["completed", "suspended", "failed", "cancelled"]
    text: str | None = None
    completion: Any = None
    completion_reason: str | None = None
    finish_reason: FinishReason | None = None
    usage: Usage = field(default_factory=Usage)
    calls: list[CallRecord] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    error: RunFailure | None = None
    budget_exceeded: BudgetExceeded | None = None
    messages: list[Message] = field(default_factory=list)
    observer_errors: int = 0
    extensions: dict[str, Any] = field(default_factory=dict)

    @property
    def plan(self) -> Any:
        """The run's plan, published by the ``planning`` extension (``None`` without one)."""
        return self.extensions.get("planning")

    def call(self, call_id: str) -> CallRecord:
        """The record with this id; ``CallNotFoundError`` (a ``KeyError``) when there is none."""
        for record in self.calls:
            if record.id == call_id:
                return record
        raise CallNotFoundError(self.run_id, call_id)

    def raise_for_status(self) -> RunResult:
        """Raise the run's failure if it failed; return ``self`` otherwise."""
        if self.error is not None:
            raise self.error
        return self
