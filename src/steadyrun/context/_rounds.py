"""Pure functions over a model context: tool rounds, clearing, offloading, summary input.

A tool round is an assistant message with tool calls followed by the ``tool`` message with
their results. The runtime tags each tool message with the record ids of its calls
(``meta["steadyrun.calls"]``), so a placeholder can name the result it replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from steadyrun.chat import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

__all__ = [
    "CALLS_META",
    "SUMMARY_META",
    "Round",
    "clear_rounds",
    "clearable_bytes",
    "offload_text",
    "record_ids",
    "rounds",
    "split_for_summary",
    "transcript",
    "verbatim_refs",
]

CALLS_META = "steadyrun.calls"
SUMMARY_META = "steadyrun.summary"
CLEARED_PREFIX = "[Result cleared"


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


def offload_text(content: str, ref: str, preview_chars: int, tool: str) -> str:
    """What the model sees in place of an offloaded result."""
    preview = content[:preview_chars]
    return (
        f"{preview}\n[Result of {tool} is {len(content)} characters; the first {len(preview)} "
        f'are shown. Read more with read_offloaded_result(ref="{ref}", offset={len(preview)}).]'
    )


def clear_rounds(
    messages: list[Message], keep: int, pinned: Callable[[str], bool]
) -> list[Message] | None:
    """The context with results of rounds older than the last ``keep`` replaced by placeholders.

    Results of pinned tools (by name) and results already cleared stay. ``None`` when nothing
    changes.
    """
    found = rounds(messages)
    old = found[: max(0, len(found) - keep)]
    out = list(messages)
    changed = False
    for r in old:
        tool_message = out[r.start + 1]
        ids = record_ids(tool_message)
        parts = []
        for i, part in enumerate(tool_message.parts):
            if (
                isinstance(part, ToolResultPart)
                and not pinned(part.name)
                and not part.content.startswith(CLEARED_PREFIX)
            ):
                ref = ids[i] if i < len(ids) else ""
                note = f'; read it again with read_offloaded_result(ref="{ref}")' if ref else ""
                part = replace(
                    part,
                    content=f"{CLEARED_PREFIX} to save context ({len(part.content)} chars){note}.]",
                    media=[],
                )
                changed = True
            parts.append(part)
        out[r.start + 1] = replace(tool_message, parts=parts)
    return out if changed else None


def clearable_bytes(messages: list[Message], keep: int, pinned: Callable[[str], bool]) -> int:
    """Bytes of results ``clear_rounds`` would replace (a cheap check before rewriting)."""
    found = rounds(messages)
    total = 0
    for r in found[: max(0, len(found) - keep)]:
        for part in messages[r.start + 1].parts:
            if (
                isinstance(part, ToolResultPart)
                and not pinned(part.name)
                and not part.content.startswith(CLEARED_PREFIX)
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


def transcript(messages: list[Message]) -> str:
    """A plain-text rendering of messages for the summarizer (no provider pairing rules)."""
    lines = []
    for m in messages:
        if (m.meta or {}).get(SUMMARY_META):
            lines.append(f"[earlier summary]\n{m.text}")
            continue
        for part in m.parts:
            if isinstance(part, TextPart) and part.text:
                lines.append(f"{m.role}: {part.text}")
            elif isinstance(part, ThinkingPart) and part.text:
                lines.append(f"{m.role} (thinking): {part.text}")
            elif isinstance(part, ToolCallPart):
                lines.append(f"{m.role} called {part.name}({part.arguments})")
            elif isinstance(part, ToolResultPart):
                tag = " (error)" if part.is_error else ""
                lines.append(f"result of {part.name}{tag}: {part.content}")
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
                and not part.content.startswith(CLEARED_PREFIX)
                and "read_offloaded_result(" not in part.content
            ):
                out.add(ids[i])
    return out
