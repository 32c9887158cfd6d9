"""Admitting a model response into the run: its blocks, and the records of its tool calls."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from steadyrun._codec import from_plain
from steadyrun.chat import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from steadyrun.records import Block, CallRecord
from steadyrun.runtime._calls import USAGE_NOTE
from steadyrun.runtime._results import call_id
from steadyrun.runtime._state import RunState
from steadyrun.runtime._texts import Texts
from steadyrun.tools import ToolSet

__all__ = ["open_batch", "record_message", "tools_usage"]


def record_message(state: RunState, model_call_id: str, message: Message) -> list[Block]:
    """Append a model message to the context and add its blocks, in order."""
    state.append(message)
    blocks = []
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
) -> None:
    """Queue a record per tool call (or fail it at once) and open the batch."""
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
