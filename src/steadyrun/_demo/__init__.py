"""``steadyrun demo``: an order-support agent that survives a crash, told on the terminal.

Everything runs in process on a ``MemoryStore`` with a scripted model, so the demo needs no
API key and always tells the same story.
"""

from __future__ import annotations

import asyncio
import os

from rich.console import Console
from rich.text import Text

from steadyrun._demo._story import run_story
from steadyrun._errors import SteadyrunError

__all__ = ["run_demo"]

_MAX_WIDTH = 100


def run_demo(*, color: bool = True) -> int:
    """Run the demo on standard output; 0 when every invariant it checks held, 1 otherwise."""
    from steadyrun import __version__

    console = Console(highlight=False, color_system="auto" if color else None)
    if console.is_terminal or "COLUMNS" in os.environ:
        console.width = min(console.width, _MAX_WIDTH)
    else:
        console.width = _MAX_WIDTH  # a file or a pipe: no terminal to wrap for
    console.print(
        Text.assemble(
            (f"steadyrun {__version__} demo", "bold"),
            ": an order-support agent survives a crash mid-refund",
        )
    )
    console.print(
        Text(
            "No model configured: using a scripted model (steadyrun.testing.ScriptedModel)",
            style="yellow",
        )
    )
    console.print(Text("Store: MemoryStore (in process); the 'bank' is a ledger in memory", "dim"))
    try:
        return asyncio.run(run_story(console))
    except (SteadyrunError, TimeoutError) as exc:
        console.print(Text(f"demo failed: {type(exc).__name__}: {exc}", style="bold red"))
        return 1
