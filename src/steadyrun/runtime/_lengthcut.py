"""A response cut by the output length limit: a correction instead of what it would have done.

Tool calls cut by the limit never run; a cut text answer is not delivered where the agent asks
for that (``Agent(correct_length_cut=True)``). Either way the model is told, and answers again.
Also where the finish reason of the last response is kept (``RunResult.finish_reason``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from steadyrun._texts import Texts
from steadyrun.chat import FinishReason, Message, ModelResponse, Part, TextPart, ToolCallPart
from steadyrun.records import Checkpoint
from steadyrun.runtime._admission import record_message
from steadyrun.runtime._state import RunState

__all__ = ["FINISH_REASON", "correct_length_cut", "finish_reason"]

FINISH_REASON = "steadyrun.finish_reason"
"""Checkpoint ``extra`` key: the finish reason of the run's last model response."""


def finish_reason(checkpoint: Checkpoint) -> FinishReason | None:
    """The finish reason of the run's last model response (``None`` before the first)."""
    found: Any = checkpoint.extra.get(FINISH_REASON)
    return cast(FinishReason, found) if isinstance(found, str) else None


def correct_length_cut(
    state: RunState, model_call_id: str, response: ModelResponse, *, corrections: int, texts: Texts
) -> bool:
    """Spend a correction on a response cut by the length limit; ``False`` when none is left.

    Cut tool calls never enter the history (nothing would answer them); the rest of the
    response does. A cut answer enters it too, so the model sees what it wrote, and is not
    delivered. A user-role note then asks the model again.
    """
    if state.cp.corrections >= corrections:
        return False
    state.cp.corrections += 1
    message = response.message
    if message.tool_calls:
        kept: list[Part] = [p for p in message.parts if not isinstance(p, ToolCallPart)]
        if kept:
            record_message(state, model_call_id, replace(message, parts=kept))
        note = texts.length_cut
    else:
        record_message(state, model_call_id, message)
        note = texts.length_cut_text
    state.append(Message(role="user", parts=[TextPart(text=note)]))
    return True
