"""Completions and guards: how a run ends with a value, and who may send an answer back.

A ``Guard`` reviews every candidate text before the run delivers it and answers ``Accept()``,
``Correct(prompt)`` (the turn runs again with the rejected text and the prompt, which neither
enter later history) or ``Finish(value)`` (the run ends with ``value``). Completion tools end a
run with a typed value; ``Agent.completion_validator`` may reject it with feedback. Batch
violations, rejected completions and guard corrections share one budget
(``Limits.corrections``); when it is spent, ``Agent.completion_fallback(reason)`` gives a fixed
completion, or the run fails with ``CorrectionsExhausted``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from steadyrun.chat import Message

__all__ = [
    "Accept",
    "CompletionFallback",
    "CompletionValidator",
    "Correct",
    "FallbackReason",
    "Finish",
    "Guard",
    "GuardView",
    "Verdict",
]


@dataclass(kw_only=True, frozen=True, slots=True)
class Accept:
    """Deliver the text as it is."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Correct:
    """Run the turn again: the model sees its rejected text and ``prompt``, once.

    Attributes:
        prompt: What to tell the model about its text.
    """

    prompt: str


@dataclass(kw_only=True, frozen=True, slots=True)
class Finish:
    """End the run with ``value`` instead of the text.

    Attributes:
        value: The run's completion (JSON-compatible).
    """

    value: Any


Verdict = Accept | Correct | Finish
"""What a guard decides about a candidate text."""


@dataclass(kw_only=True, frozen=True, slots=True)
class GuardView:
    """What a guard sees.

    Attributes:
        run_id: The run.
        text: The candidate text.
        messages: The model context the text answers (not to be changed).
        turn: The run's turn.
        corrections_left: Corrections the run may still use.
    """

    run_id: str
    text: str
    messages: list[Message] = field(default_factory=list)
    turn: int = 0
    corrections_left: int = 0


class Guard(Protocol):
    """Reviews candidate text before a run delivers it (sync or async)."""

    def review(self, view: GuardView) -> Verdict | Awaitable[Verdict]:
        """Decide about ``view.text``; raising fails the run."""
        ...


FallbackReason = Literal["corrections_exhausted", "budget_exhausted", "guard_rejected"]
"""Why a fallback completion was used."""

CompletionValidator = Callable[[Any], str | None]
"""Checks a completion value: ``None`` accepts it, a string is feedback for the model."""

CompletionFallback = Callable[[FallbackReason], Any]
"""Gives the fixed completion of a run whose corrections (or iterations) ran out."""
