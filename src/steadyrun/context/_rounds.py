"""Pure functions over a model context: tool rounds, clearing, offloading, summary input.

A tool round is an assistant message with tool calls followed by the ``tool`` message with
their results. The runtime tags each tool message with the record ids of its calls
(``meta["steadyrun.calls"]``), so a placeholder can name the result it replaced, and with the
results it cleared (``meta["steadyrun.cleared"]``) or offloaded (``meta["steadyrun.offloaded"]``),
so that neither is recognized by its text, which depends on the run's ``Texts``.

The notes the model reads are the ``Texts`` given (English when none is).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from steadyrun._texts import Texts, default_texts
from steadyrun.chat import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from steadyrun.context._read_tool import READ_TOOL

__all__ = [
    "CALLS_META",
    "CLEARED_META",
    "OFFLOADED_META",
    "SUMMARY_META",
    "Round",
    "clear_rounds",
    "clearable_bytes",
    "is_cleared",
    "mark",
    "offload_text",
    "record_ids",
    "result_key",
    "rounds",
    "split_for_summary",
    "transcript",
    "verbatim_refs",
]

CALLS_META = "steadyrun.calls"
SUMMARY_META = "steadyrun.summary"
CLEARED_META = "steadyrun.cleared"
"""Meta key of a tool message: the results it holds cleared (JSON list of ``result_key``)."""
OFFLOADED_META = "steadyrun.offloaded"
"""Meta key of a tool message: the results it holds offloaded (JSON list of ``result_key``)."""
LEGACY_CLEARED_PREFIX = "[Result cleared"
"""How contexts saved before ``CLEARED_META`` show a cleared result (English only)."""
LEGACY_OFFLOADED = "read_offloaded_result("
"""How contexts saved before ``OFFLOADED_META`` show an offloaded result."""


def texts_or_english(texts: Texts | None) -> Texts:
    """``texts``, or the English texts when it is ``None``."""
    if texts is not None:
        return texts
    return default_texts()


def result_key(part: ToolResultPart, index: int) -> str:
    """What names a result in its tool message's marks: its call id (else ``#<index>``)."""
    return part.call_id or f"#{index}"


def _marked(message: Message, key: str) -> set[str]:
    raw = (message.meta or {}).get(key)
    if not raw:
        return set()
    try:
        found = json.loads(raw)
    except ValueError:
        return set()
    return {str(k) for k in found} if isinstance(found, list) else set()


def mark(message: Message, key: str, results: list[str]) -> Message:
    """``message`` with ``results`` (``result_key`` values) added to its mark ``key``."""
    if not results:
        return message
    marked = sorted(_marked(message, key) | set(results))
    return replace(message, meta={**(message.meta or {}), key: json.dumps(marked)})


def is_cleared(message: Message, index: int) -> bool:
    """Whether the result at ``index`` of a tool message was cleared (in any language)."""
    part = message.parts[index]
    if not isinstance(part, ToolResultPart):
        return False
    if result_key(part, index) in _marked(message, CLEARED_META):
        return True
    return part.content.startswith(LEGACY_CLEARED_PREFIX)


def is_offloaded(message: Message, index: int) -> bool:
    """Whether the result at ``index`` of a tool message was offloaded (in any language)."""
    part = message.parts[index]
    if not isinstance(part, ToolResultPart):
        return False
    if result_key(part, index) in _marked(message, OFFLOADED_META):
        return True
    return LEGACY_OFFLOADED in part.content


@dataclass(frozen=True, slots=True)
class Round:
    """A tool round: the assistant message at ``start`` and its tool message at ``start + 1``."""

    start: int


def rounds(messages: list[Message]) -> list[Round]:
    """The tool rounds of a context, in order."""
    out = []
    for i in range(len(messages) - 1):
        is_call = messages[i].role == "assistant" and messages[i].tool_calls
        if is_call and messages[i + 1].role == "tool":
            out.append(Round(i))
    return out


def record_ids(message: Message) -> list[str]:
    """The record ids a tool message's results belong to (in part order)."""
    ids = (message.meta or {}).get(CALLS_META, "")
    return ids.split(",") if ids else []


def offload_text(
    content: str, ref: str, preview_chars: int, tool: str, texts: Texts | None = None
) -> str:
    """What the model sees in place of an offloaded result.

    Mark the result in its tool message too (``mark(message, OFFLOADED_META, [key])``): the
    text alone is not how an offloaded result is recognized.
    """
    texts = texts_or_english(texts)
    preview = content[:preview_chars]
    note = texts.offload_note.format(
        name=tool, size=str(len(content)), shown=str(len(preview)), ref=ref
    )
    return f"{preview}\n{note}"


def clear_rounds(
    messages: list[Message],
    keep: int,
    pinned: Callable[[str], bool],
    texts: Texts | None = None,
) -> list[Message] | None:
    """The context with results of rounds older than the last ``keep`` replaced by placeholders.

    Results of pinned tools (by name) and results already cleared stay. Cleared results are
    marked in their tool message (``CLEARED_META``). ``None`` when nothing changes.
    """
    texts = texts_or_english(texts)
    found = rounds(messages)
    old = found[: max(0, len(found) - keep)]
    out = list(messages)
    changed = False
    for r in old:
        tool_message = out[r.start + 1]
        ids = record_ids(tool_message)
        parts = []
        cleared = []
        for i, part in enumerate(tool_message.parts):
            if (
                isinstance(part, ToolResultPart)
                and not pinned(part.name)
                and not is_cleared(tool_message, i)
            ):
                # A read-back result is named by its call's own arguments, which stay in
                # the context: pointing at the read call would only chain reads of reads.
                ref = ids[i] if i < len(ids) and part.name != READ_TOOL else ""
                size = str(len(part.content))
                note = (
                    texts.cleared_note.format(size=size, ref=ref)
                    if ref
                    else texts.cleared_note_plain.format(size=size)
                )
                part = replace(part, content=note, media=[])
                cleared.append(result_key(part, i))
            parts.append(part)
        if cleared:
            changed = True
            out[r.start + 1] = mark(replace(tool_message, parts=parts), CLEARED_META, cleared)
    return out if changed else None


def clearable_bytes(messages: list[Message], keep: int, pinned: Callable[[str], bool]) -> int:
    """Bytes of results ``clear_rounds`` would replace (a cheap check before rewriting)."""
    found = rounds(messages)
    total = 0
    for r in found[: max(0, len(found) - keep)]:
        tool_message = messages[r.start + 1]
        for i, part in enumerate(tool_message.parts):
            if (
                isinstance(part, ToolResultPart)
                and not pinned(part.name)
                and not is_cleared(tool_message, i)
            ):
                total += len(part.content)
    return total


def split_for_summary(
    messages: list[Message], keep: int, pinned: Callable[[str], bool]
) -> tuple[list[Message], list[Message], list[Message]] | None:
    """Split a context into (to summarize, pinned rounds kept verbatim, recent tail).

    The tail starts at the ``keep``-th last tool round (or holds the last message when there
    are too few rounds). Rounds of the head with a pinned call are kept whole and in order.
    ``None`` when there is nothing to summarize.
    """
    found = rounds(messages)
    if len(found) > keep:
        cut = found[len(found) - keep].start if keep else len(messages)
    else:
        return None
    head, tail = messages[:cut], messages[cut:]
    keep_idx: set[int] = set()
    for r in found:
        if r.start >= cut:
            break
        calls = messages[r.start].tool_calls
        if any(pinned(c.name) for c in calls):
            keep_idx.update((r.start, r.start + 1))
    kept = [m for i, m in enumerate(head) if i in keep_idx]
    summarize = [m for i, m in enumerate(head) if i not in keep_idx]
    if not summarize:
        return None
    return summarize, kept, tail


def transcript(messages: list[Message], texts: Texts | None = None) -> str:
    """A plain-text rendering of messages for the summarizer (no provider pairing rules)."""
    texts = texts_or_english(texts)
    lines = []
    for m in messages:
        if (m.meta or {}).get(SUMMARY_META):
            lines.append(texts.transcript_summary.format(summary=m.text))
            continue
        for part in m.parts:
            if isinstance(part, TextPart) and part.text:
                lines.append(f"{m.role}: {part.text}")
            elif isinstance(part, ThinkingPart) and part.text:
                lines.append(texts.transcript_thinking.format(role=m.role, text=part.text))
            elif isinstance(part, ToolCallPart):
                lines.append(
                    texts.transcript_call.format(
                        role=m.role, name=part.name, arguments=part.arguments
                    )
                )
            elif isinstance(part, ToolResultPart) and part.is_error:
                lines.append(texts.transcript_error.format(name=part.name, content=part.content))
            elif isinstance(part, ToolResultPart):
                lines.append(texts.transcript_result.format(name=part.name, content=part.content))
    return "\n".join(lines)


def verbatim_refs(messages: list[Message]) -> set[str]:
    """Record ids whose results are in the context in full.

    Not offloaded, not cleared, not summarized away.
    """
    out: set[str] = set()
    for m in messages:
        if m.role != "tool":
            continue
        ids = record_ids(m)
        for i, part in enumerate(m.parts):
            if (
                isinstance(part, ToolResultPart)
                and i < len(ids)
                and not is_cleared(m, i)
                and not is_offloaded(m, i)
            ):
                out.add(ids[i])
    return out
