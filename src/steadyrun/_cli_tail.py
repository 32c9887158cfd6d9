"""``steadyrun runs tail``: a run's display stream on a terminal.

The run's owner, in any process on the same store, publishes on the store's live feed (see
``steadyrun.stream.follow``), so the model's words are printed as they are written and a call's
new status as soon as it is saved. Words already printed live are not printed again when the
saved response replaces them; words of a call lost in a crash are followed by a note.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from steadyrun._cli_target import Target
from steadyrun.stream import (
    BlockAdded,
    BlockRemoved,
    CallStatusChanged,
    DisplaySnapshot,
    Fragment,
    Publisher,
    RunStatusChanged,
    TextFragment,
    apply,
)

__all__ = ["tail_run"]


class _Printer:
    """Prints what a display stream adds, once."""

    def __init__(self, json_out: bool) -> None:
        self.json_out = json_out
        self.console = Console(stderr=json_out, highlight=False)
        self.live_said = ""  # the words printed live since the last stored text
        self.statuses: dict[str, str] = {}
        self.open_line = False
        self.maybe_dropped = False  # a live block went away: replaced, or its call was lost

    def emit(self, event: dict[str, Any]) -> None:
        print(json.dumps(event), flush=True)

    def words(self, text: str, block_id: str) -> None:
        if self.maybe_dropped:
            self.maybe_dropped = False
            self.dropped()  # new words with no stored text between: the earlier were lost
        self.live_said += text
        if self.json_out:
            self.emit({"fragment": text, "block": block_id})
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self.open_line = True

    def end_line(self) -> None:
        if self.open_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.open_line = False

    def stored_text(self, text: str, kind: str) -> None:
        self.maybe_dropped = False
        if kind != "content":
            return
        if self.live_said and text.strip() == self.live_said.strip():
            self.live_said = ""  # printed as it was written
            self.end_line()
            return
        self.live_said = ""
        self.end_line()
        if self.json_out:
            self.emit({"text": text})
        else:
            self.console.print(text, soft_wrap=True, markup=False)

    def dropped(self) -> None:
        if not self.live_said:
            return
        self.live_said = ""
        self.end_line()
        if self.json_out:
            self.emit({"dropped": True})
        else:
            self.console.print("[dim](the call was cut off; the model is asked again)[/]")

    def call(self, call_id: str, name: str, status: str) -> None:
        if self.statuses.get(call_id) == status:
            return
        self.statuses[call_id] = status
        self.end_line()
        if self.json_out:
            self.emit({"call": call_id, "tool": name, "status": status})
        else:
            self.console.print(f"{call_id}  {name}  {status}")

    def end(self, run_id: str, snap: DisplaySnapshot) -> None:
        self.end_line()
        if self.json_out:
            self.emit({"run": run_id, "status": snap.status, "text": snap.text})
        else:
            self.console.print(f"[bold]{snap.status}[/] {snap.error or ''}".rstrip())


async def tail_run(t: Target, run_id: str, interval: float, json_out: bool) -> None:
    """Print the run's stream until it is no longer running (see the module)."""
    out = _Printer(json_out)
    snap: DisplaySnapshot | None = None
    async for event in Publisher(t.store).follow(run_id, poll_interval=interval):
        if event.kind == "snapshot" and event.snapshot is not None:
            first = snap is None
            snap = event.snapshot
            if first:
                for block in snap.blocks:
                    if block.live:
                        out.words(block.text, block.id)
                    else:
                        out.stored_text(block.text, block.kind)
            for c in snap.calls:
                out.call(c.id, c.name, c.status)
        elif event.kind == "delta" and event.delta is not None and snap is not None:
            delta = event.delta
            before = snap
            snap = apply(snap, delta)
            match delta:
                case TextFragment(block_id=block_id, text=text):
                    out.words(text, block_id)
                case BlockAdded(block=block) if block.live and block.kind == "content":
                    out.words(block.text, block.id)
                case BlockAdded(block=block) if not block.live:
                    out.stored_text(block.text, block.kind)
                case BlockRemoved(block_id=block_id):
                    gone = before.block(block_id)
                    if gone is not None and gone.live:
                        out.maybe_dropped = True
                case CallStatusChanged(call=call):
                    out.call(call.id, call.name, call.status)
                case RunStatusChanged():
                    pass
                case _ if isinstance(delta, Fragment):
                    pass  # thinking and tool arguments are not printed
        if snap is not None and snap.status != "running":
            if out.maybe_dropped:
                out.dropped()
            out.end(run_id, snap)
            return
