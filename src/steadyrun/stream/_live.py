"""Live blocks: the model's words on a display while the call that writes them still runs.

Fragments are not saved, so the blocks they make are the display's own: ``live`` blocks after
the stored ones, grown by each fragment, and given up for the stored blocks once the response
is saved (or dropped when the call was lost). These pure functions compute the snapshots; the
publisher diffs them into ``TextFragment`` / ``ThinkingFragment`` / ``ToolArgumentsFragment``
deltas, and ``BlockRemoved`` for dropped live blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from steadyrun.records._copy import copied
from steadyrun.stream._model import DisplayBlock, DisplaySnapshot

__all__ = ["LiveCall", "add_fragment", "live_block_id", "stored_end", "with_live", "without_live"]

_KINDS: dict[str, Literal["thinking", "content", "tool_call"]] = {
    "text": "content",
    "thinking": "thinking",
    "tool_call": "tool_call",
}


@dataclass(slots=True)
class LiveCall:
    """The model call a display shows live blocks of.

    Attributes:
        model_call_id: The call.
        base: Where the stored timeline ended when the call started (see ``stored_end``).
        open: Whether fragments may still come (the response has not arrived).
    """

    model_call_id: str
    base: int
    open: bool = True

    def replaced_by(self, stored: DisplaySnapshot) -> bool:
        """Whether ``stored`` (reloaded from the store) holds the call's saved response."""
        return not self.open and stored_end(stored) > self.base


def live_block_id(model_call_id: str, part: str, index: int) -> str:
    """The id of the live block of one part of a streaming response."""
    return f"live-{model_call_id}-{index}-{part}"


def stored_end(snap: DisplaySnapshot) -> int:
    """One past the last stored (not live) block's position, 0 for none."""
    return max((b.position + 1 for b in snap.blocks if not b.live), default=0)


def without_live(snap: DisplaySnapshot) -> DisplaySnapshot:
    """The snapshot without its live blocks."""
    if not any(b.live for b in snap.blocks):
        return snap
    return copied(snap, blocks=tuple(b for b in snap.blocks if not b.live))


def with_live(stored: DisplaySnapshot, current: DisplaySnapshot) -> DisplaySnapshot:
    """``stored`` (freshly loaded) with ``current``'s live blocks kept after its own blocks."""
    live = [b for b in current.blocks if b.live]
    if not live:
        return stored
    return copied(stored, blocks=(*stored.blocks, *live)).normalized()


def add_fragment(
    snap: DisplaySnapshot,
    call: LiveCall,
    *,
    part: str,
    index: int,
    text: str,
    name: str | None = None,
) -> DisplaySnapshot:
    """``snap`` with one fragment added: a new live block, or more text on an existing one."""
    kind = _KINDS.get(part)
    if kind is None:
        return snap
    block_id = live_block_id(call.model_call_id, part, index)
    block = snap.block(block_id)
    if block is None:
        block = DisplayBlock(
            id=block_id,
            kind=kind,
            position=call.base + index,
            text=text,
            live=True,
            name=name,
        )
        return copied(snap, blocks=(*snap.blocks, block)).normalized()
    grown = copied(block, text=block.text + text, name=block.name or name)
    return copied(snap, blocks=tuple(grown if b.id == block_id else b for b in snap.blocks))
