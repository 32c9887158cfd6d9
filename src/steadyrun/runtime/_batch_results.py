"""What a batch's results are to the model (its tool message, a completion, direct text).

Pure helpers of the loop, with the record ids of a batch's calls.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from steadyrun._texts import Texts, default_texts
from steadyrun.chat import Message, Part, ToolResultPart
from steadyrun.context import (
    CALLS_META,
    OFFLOADED_META,
    ContextPolicy,
    mark,
    offload_text,
    result_key,
)
from steadyrun.records import CallRecord
from steadyrun.tools import DEFAULT_MAX_RESULT_CHARS, ToolSet

__all__ = [
    "call_id",
    "completion_of",
    "direct_text",
    "result_part",
    "truncated",
    "tool_message",
    "uses_correction",
]


def call_id(model_call_id: str, index: int) -> str:
    """The record id of the ``index``-th tool call of a model call."""
    return f"{model_call_id}.c{index + 1}"


def result_part(record: CallRecord) -> ToolResultPart:
    """What the model sees of one settled (or handed-over) call."""
    # Detached calls and submissions are not settled yet, but the model has their receipt.
    ok = record.status == "succeeded" or (
        not record.settled and record.handover in ("detached", "submitted")
    )
    # An unknown outcome's result is what the model is told; its error is the host's detail.
    unknown = record.status in ("interrupted", "needs_review") and record.result is not None
    content = record.result if ok or unknown or record.error is None else record.error
    return ToolResultPart(
        call_id=record.provider_call_id,
        name=record.name,
        content=content or "",
        is_error=not ok,
        media=list(record.media),
    )


def tool_message(
    records: list[CallRecord],
    tools: ToolSet,
    policy: ContextPolicy | None,
    texts: Texts | None = None,
) -> Message:
    """The results of a batch in call order, large ones offloaded, tagged with record ids.

    A result over its tool's ``max_result_chars`` (``DEFAULT_MAX_RESULT_CHARS`` for a call of
    an unknown tool) never goes to the model whole: it is offloaded where it can be (a context
    policy, a tool not ``intact``), and truncated with a note otherwise.
    """
    parts: list[Part] = []
    offloaded: list[str] = []
    for i, record in enumerate(records):
        part = result_part(record)
        tool = tools.get(record.name)
        intact = tool is not None and tool.retain == "intact"
        bound = tool.max_result_chars if tool is not None else DEFAULT_MAX_RESULT_CHARS
        over = bound is not None and len(part.content) > bound
        large = policy is not None and len(part.content.encode()) > policy.offload_bytes()
        if policy is not None and (large or over) and not intact:
            preview = policy.preview_chars if bound is None else min(bound, policy.preview_chars)
            content = offload_text(part.content, record.id, preview, record.name, texts)
            part = replace(part, content=content)
            offloaded.append(result_key(part, i))
        elif over and bound is not None:
            part = replace(part, content=truncated(part.content, bound, record.name, texts))
        parts.append(part)
    message = Message(role="tool", parts=parts, meta={CALLS_META: ",".join(r.id for r in records)})
    return mark(message, OFFLOADED_META, offloaded)


def truncated(content: str, bound: int, name: str, texts: Texts | None) -> str:
    """The first ``bound`` characters of a result, and a note saying the rest is left out."""
    texts = texts or default_texts()
    note = texts.result_truncated.format(name=name, size=str(len(content)), shown=str(bound))
    return f"{content[:bound]}\n{note}"


def completion_of(records: list[CallRecord]) -> tuple[Any, bool] | None:
    """The (value, fixed) of the batch's accepted completion, if it has one."""
    for record in records:
        if record.completion is not None and record.status == "succeeded":
            return record.completion.value, record.completion.fixed
    return None


def uses_correction(records: list[CallRecord], tools: ToolSet) -> bool:
    """Whether the batch spends a correction: a completion tool failed.

    It failed by raising, by being refused by the validator, or by being called together with
    other calls.
    """
    for record in records:
        tool = tools.get(record.name)
        if tool is not None and tool.completion and record.status == "failed":
            return True
    return False


def direct_text(records: list[CallRecord], tools: ToolSet) -> str | None:
    """The turn's text when every call is of a direct-result tool and all succeeded."""
    found = [tools.get(r.name) for r in records]
    direct = bool(records) and all(t is not None and t.direct_result for t in found)
    if direct and all(r.status == "succeeded" for r in records):
        return "\n\n".join(r.result or "" for r in records)
    return None
