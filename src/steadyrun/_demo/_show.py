"""How the demo prints: a live narrator (an ``Observer``) and the summary at the end."""

from __future__ import annotations

import json
from collections.abc import Iterable

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from steadyrun.chat import ModelResponse, Usage
from steadyrun.records import CallRecord
from steadyrun.runtime import Observer

__all__ = ["STATUS_STYLES", "Narrator", "Symbols", "call_table", "describe_call"]

STATUS_STYLES = {
    "queued": "dim",
    "running": "cyan",
    "succeeded": "green",
    "needs_review": "bold yellow",
    "interrupted": "yellow",
    "failed": "bold red",
    "cancelled": "bright_black",
}


_INDENT = 10  # width of the label column of timeline lines


class Symbols:
    """Marks that degrade to ASCII on consoles that cannot print Unicode."""

    def __init__(self, console: Console) -> None:
        fancy = console.encoding.lower().startswith("utf")
        self.ok = "✓" if fancy else "ok"
        self.bad = "✗" if fancy else "FAIL"
        self.arrow = "→" if fancy else "->"
        self.ellipsis = "…" if fancy else "..."
        self.dot = "·" if fancy else "-"


def status_text(status: str) -> Text:
    """A status, colored by what it means."""
    return Text(status, style=STATUS_STYLES.get(status, "magenta"))


def describe_call(name: str, arguments: str, limit: int, ellipsis: str) -> str:
    """``name(arg='value', ...)``, shortened to ``limit`` characters."""
    try:
        args = json.loads(arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    else:
        inner = arguments
    out = f"{name}({inner})"
    return out if len(out) <= limit else out[: limit - len(ellipsis) - 1] + ellipsis + ")"


class Narrator(Observer):
    """Prints the run as it happens: model responses, tool calls starting and settling."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.sym = Symbols(console)

    # -- lines -----------------------------------------------------------------------------

    def line(self, who: str, what: str | Text, style: str = "") -> None:
        """One timeline line: a short label column, then the event (wrapped under itself)."""
        content = what if isinstance(what, Text) else Text(what)
        indent = " " * _INDENT
        for i, part in enumerate(content.wrap(self.console, self.console.width - _INDENT)):
            part.rstrip()
            row = Text(f"  {who:<{_INDENT - 3}} " if i == 0 else indent, style=style or "bold")
            row.end = ""
            self.console.print(Text.assemble(row, part), no_wrap=True, crop=False)

    def section(self, title: str) -> None:
        """A rule between the acts of the story."""
        self.console.rule(Text(title, style="bold"), align="left", style="dim")

    # -- observer callbacks ----------------------------------------------------------------

    async def on_model_response(
        self, run_id: str, model_call_id: str, response: ModelResponse
    ) -> None:
        """Show what the model said and which tools it asked for."""
        message = response.message
        if message.text and message.tool_calls:
            self.line(model_call_id, Text.assemble(("model: ", "magenta"), message.text))
        elif message.text:
            self.line(
                model_call_id, Text.assemble(("model: ", "magenta"), "answers the customer (below)")
            )
        elif not message.tool_calls:  # a real model may say nothing at all
            self.line(model_call_id, Text.assemble(("model: ", "magenta"), "answers with no text"))
        calls = message.tool_calls
        if calls:
            names = ", ".join(c.name for c in calls)
            label = "" if message.text else model_call_id
            self.line(
                label, Text(f"{self.sym.arrow} asks for {len(calls)} call(s): {names}", "dim")
            )

    async def on_tool_start(self, run_id: str, call: CallRecord) -> None:
        """Show a call starting, with its arguments."""
        width = max(30, self.console.width - 24)
        shown = describe_call(call.name, call.arguments, width, self.sym.ellipsis)
        self.line(call.id, Text(shown).append("  ").append(status_text("running")))

    async def on_tool_settle(self, run_id: str, call: CallRecord) -> None:
        """Show a call settling; for a call settled by recovery, why and what the model hears."""
        line = Text(f"{call.name}  ").append(status_text(call.status))
        if call.status in ("interrupted", "needs_review"):
            line.append(f"  {_traits(call)}: settled by recovery, never rerun", "dim")
        self.line(call.id, line)
        if call.status in ("interrupted", "needs_review") and call.result:
            self.line("", Text.assemble(("the model is told: ", "dim"), repr(call.result)))


def _traits(record: CallRecord | None) -> str:
    if record is None:
        return "record missing"
    effects = "side effects" if record.side_effects else "no side effects"
    replay = "replayable" if record.replayable else "not replayable"
    return f"{effects}, {replay}"


def call_table(calls: Iterable[CallRecord], narrator: Narrator) -> None:
    """Print every call of the run with its final status, one line each."""
    width = narrator.console.width - _INDENT
    call_w = max(24, width * 9 // 20)
    status_w = 14
    result_w = max(10, width - call_w - status_w - 2)
    header = Text(f"{'tool call':<{call_w + 2}}{'final status':<{status_w}}result the model saw")
    narrator.line("call", header, style="bold")
    for record in calls:
        shown = Text(describe_call(record.name, record.arguments, 200, narrator.sym.ellipsis))
        shown.truncate(call_w, overflow="ellipsis", pad=True)
        status = status_text(record.status)
        status.truncate(status_w, pad=True)
        outcome = record.result if record.status == "succeeded" else record.error or record.result
        seen = Text(" ".join((outcome or "").split()), style="dim")
        seen.truncate(result_w, overflow="ellipsis")
        narrator.line(record.id, Text.assemble(shown, "  ", status, seen))


def answer_panel(text: str) -> Panel:
    """The run's final answer."""
    return Panel(Text(text), title="final answer", title_align="left", border_style="green")


def usage_line(usage: Usage, *, scripted: bool = True) -> str:
    """The run's usage in one line."""
    note = " (placeholder counts from the scripted model)" if scripted else ""
    return (
        f"{usage.requests} model requests, {usage.input_tokens} input + "
        f"{usage.output_tokens} output tokens{note}"
    )
