"""Admitting a model response into the run: its blocks, and the records of its tool calls."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from steadyrun._codec import from_plain
from steadyrun._texts import Texts
from steadyrun.chat import (
    Message,
    ModelResponse,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from steadyrun.records import Block, CallRecord
from steadyrun.runtime._batch_results import call_id
from steadyrun.runtime._calls import USAGE_NOTE
from steadyrun.runtime._scrub import scrub as _clean
from steadyrun.runtime._scrub import storable as _valid
from steadyrun.runtime._state import RunState
from steadyrun.tools import ToolSet

__all__ = ["open_batch", "record_message", "scrub_response", "tools_usage"]


def record_message(
    state: RunState,
    model_call_id: str,
    message: Message,
    *,
    usage: Usage | None = None,
    at: datetime | None = None,
) -> list[Block]:
    """Append a model message to the context and add its blocks, in order.

    ``usage`` (the model call's) goes on the first block, ``at`` on every block.
    """
    state.append(message)
    blocks: list[Block] = []
    calls = 0
    for i, part in enumerate(message.parts):
        block: Block | None = None
        position = state.cp.next_position
        bid = f"{model_call_id}.b{i + 1}"
        if isinstance(part, TextPart):
            block = Block(id=bid, kind="content", position=position, text=part.text)
        elif isinstance(part, ThinkingPart):
            block = Block(id=bid, kind="thinking", position=position, text=part.text)
        elif isinstance(part, ToolCallPart):
            block = Block(
                id=bid,
                kind="tool_call",
                position=position,
                call_id=call_id(model_call_id, calls),
            )
            calls += 1
        if block is not None:
            block.model_call_id = model_call_id
            block.turn = state.cp.turn
            block.at = at
            if not blocks:
                block.usage = usage
            state.add_block(block)
            blocks.append(block)
    return blocks


def open_batch(
    state: RunState,
    model_call_id: str,
    parts: Sequence[ToolCallPart],
    *,
    tools: ToolSet,
    texts: Texts,
    now: datetime,
    denied: Mapping[int, str],
    garbled: Collection[int] = (),
) -> None:
    """Queue a record per tool call (or fail it at once) and open the batch.

    ``denied`` holds the refusals the extensions made, by call index; a call in ``garbled``
    (see ``scrub_response``) is refused too, unless an extension refused it first.
    """
    denied = dict(denied)
    for i in garbled:
        error = texts.invalid_arguments.format(name=parts[i].name, error=texts.garbled_arguments)
        denied.setdefault(i, error)
    batch = []
    found = [tools.get(p.name) for p in parts]
    # A completion tool must be the only call of its response; otherwise none runs.
    completing = next((t for t in found if t is not None and t.completion), None)
    not_alone = completing is not None and len(parts) > 1
    for i, part in enumerate(parts):
        tool = found[i]
        record = CallRecord(
            id=call_id(model_call_id, i),
            model_call_id=model_call_id,
            provider_call_id=part.call_id,
            name=part.name,
            arguments=part.arguments,
            rev=1,
            status="queued",
            replayable=tool.replayable if tool else False,
            side_effects=tool.side_effects if tool else False,
        )
        if not_alone and completing is not None:
            record.status = "failed"
            record.error = texts.completion_not_alone.format(name=completing.name)
            record.completed_at = now
        elif i in denied:
            record.status = "failed"
            record.error = denied[i]
            record.completed_at = now
        state.put_call(record, saved=False)
        batch.append(record.id)
    state.cp.batch = batch
    state.cp.phase = "batch"


def tools_usage(records: Sequence[CallRecord]) -> Usage:
    """Usage of model calls the batch's tools made themselves (sub-agents, say)."""
    total = Usage()
    for record in records:
        note = record.notes.get(USAGE_NOTE)
        if note:
            total = total + from_plain(json.loads(note), Usage)
    return total


def scrub_response(response: ModelResponse) -> tuple[ModelResponse, set[int]]:
    """A response whose text can be stored, and the indexes of tool calls that were garbled.

    A provider's JSON may carry lone surrogates (an escaped U+DC80, say), which no store can
    encode. Text and thinking get U+FFFD in their place; a tool call with one in its name or
    arguments is kept (with U+FFFD) but must not run: its index is returned so it is refused.
    """
    message = response.message
    if all(
        _valid(p.text if isinstance(p, TextPart | ThinkingPart) else "") for p in message.parts
    ) and all(_valid(p.name) and _valid(p.arguments) for p in message.tool_calls):
        return response, set()
    garbled: set[int] = set()
    parts: list[Part] = []
    calls = 0
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            part = replace(part, text=_clean(part.text))
        elif isinstance(part, ToolCallPart):
            if not (_valid(part.name) and _valid(part.arguments)):
                garbled.add(calls)
                part = replace(part, name=_clean(part.name), arguments=_clean(part.arguments))
            calls += 1
        parts.append(part)
    return replace(response, message=replace(message, parts=parts)), garbled
