"""The HTTP shapes of a run's history and of a fork's edit."""

from __future__ import annotations

import json

from steadyrun.chat import Message, Part, TextPart, ToolCallPart, ToolResultPart
from steadyrun.context import CALLS_META
from steadyrun.runtime import ForkedRun, HistoryStep
from steadyrun.runtime._host import BY_META
from steadyrun.service._schemas import EditIn, ForkOut, HistoryMessageOut, HistoryStepOut

__all__ = ["edit_message", "fork_out", "step_out"]


def edit_message(edit: EditIn) -> Message | str:
    """The edit ``Runtime.fork`` takes: text alone keeps the replaced message's role."""
    if not edit.tool_calls:
        return edit.text
    parts: list[Part] = [TextPart(text=edit.text)] if edit.text else []
    parts += [
        ToolCallPart(call_id="", name=c.name, arguments=json.dumps(c.arguments))
        for c in edit.tool_calls
    ]
    return Message(role="assistant", parts=parts)


def fork_out(forked: ForkedRun) -> ForkOut:
    """The API's view of a fork."""
    return ForkOut(
        run_id=forked.run_id,
        forked_from=forked.forked_from,
        step=forked.step,
        created=forked.created,
        status=forked.status,
    )


def step_out(step: HistoryStep) -> HistoryStepOut:
    """The API's view of one step."""
    usage = step.usage
    # A step adds at most one model response, that of its last model call; a rewrite's
    # messages are a whole context, whose calls keep the ids the provider gave them.
    model_call = f"m{step.model_calls}" if not step.rewrote else None
    return HistoryStepOut(
        step=step.step,
        at=step.at,
        status=step.status,
        phase=step.phase,
        turn=step.turn,
        model_calls=step.model_calls,
        rewrote=step.rewrote,
        context_length=step.context_length,
        messages=[_message_out(m, model_call) for m in step.messages],
        calls=[{"id": c.id, "name": c.name, "status": c.status} for c in step.calls],
        usage={
            "requests": usage.requests,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
        },
        text=step.text,
        error=step.error,
        forked_from=(
            {"run_id": step.forked_from[0], "step": step.forked_from[1]}
            if step.forked_from is not None
            else None
        ),
    )


def _message_out(message: Message, model_call: str | None) -> HistoryMessageOut:
    # Record ids (m<n>.c<i>) name calls the way the rest of the API does; a provider's own
    # call id is only a fallback for messages that carry no record ids.
    records = (message.meta or {}).get(CALLS_META, "").split(",")
    asked = message.tool_calls
    results = [p for p in message.parts if isinstance(p, ToolResultPart)]
    return HistoryMessageOut(
        role=message.role,
        text=message.text,
        by=(message.meta or {}).get(BY_META),
        tool_calls=[
            {
                "id": f"{model_call}.c{i + 1}" if model_call else p.call_id,
                "name": p.name,
                "arguments": p.arguments,
            }
            for i, p in enumerate(asked)
        ],
        tool_results=[
            {
                "call_id": records[i] if i < len(records) and records[i] else p.call_id,
                "name": p.name,
                "content": p.content,
                "is_error": p.is_error,
            }
            for i, p in enumerate(results)
        ],
    )
