"""``steadyrun demo``: an order-support agent that survives a real crash, told on the terminal.

The run lives in a SQLite file. A worker process runs it with a scripted model (no API key,
always the same story) until its refund has moved the money; the demo then kills that process
with SIGKILL, shows what the file holds, and resumes the run in a new worker process. The
"bank" is a ledger file beside the database, so it proves how often the refund really ran.

``--model SPEC`` tells the story with a real model instead (``resolve_model(SPEC)`` in each
worker). A real model may not follow the script, so its checks are reported, not enforced.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from steadyrun._errors import SteadyrunError

if TYPE_CHECKING:
    from steadyrun._demo._story import DemoFiles

__all__ = ["model_problem", "run_demo"]

_MAX_WIDTH = 100
_STDERR_LINES = 15

# provider -> the environment variables its API key may come from (one is enough)
_KEYS = {
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}


def model_problem(spec: str) -> str:
    """Why ``spec`` cannot run the demo (empty when it can), found without any request.

    Checks the spec's form, its provider and extra, the API key in the environment for the
    hosted providers, and what the adapter's constructor checks (a local model's file...).
    """
    from steadyrun._errors import UsageError
    from steadyrun.models import check_model_spec, resolve_model

    try:
        check_model_spec(spec)
        provider = spec.partition(":")[0]
        keys = _KEYS.get(provider, ())
        if keys and not any(os.environ.get(k) for k in keys):
            return (
                f"the {provider!r} provider needs an API key: set {' or '.join(keys)} "
                "(or try local:gemma3-270m, which runs on this machine)"
            )
        client = resolve_model(spec)
    except UsageError as exc:
        return str(exc)
    close = getattr(client, "close", None)
    if callable(close):
        close()
    return ""


def run_demo(
    *,
    color: bool = True,
    db: str | Path | None = None,
    keep: bool = False,
    model: str | None = None,
) -> int:
    """Run the demo on standard output.

    Args:
        color: Print with colors (when the terminal has them).
        db: The SQLite file to create and keep; by default one in a temporary directory.
        keep: Keep the temporary directory instead of removing it at the end.
        model: A model spec (``local:gemma3-270m``, ``openai:gpt-4.1``...) to tell the story
            with instead of the scripted model; check it first with ``model_problem``.

    Returns:
        0 when every invariant the demo checks held (with a real model: when the demo ran to
        its end, whatever the model did), 1 when one did not or the demo failed, 2 when
        ``db`` cannot be used.
    """
    from steadyrun import __version__

    # Imported here, not at the top: the workers run as ``python -m steadyrun._demo._worker``,
    # and a package that imported that module already would make runpy warn on every start.
    from steadyrun._demo._story import DemoFailure, DemoFiles, run_story

    tmp: Path | None = None
    if db is not None:
        files = DemoFiles.at(Path(db))
        problem = _unusable(files)
        if problem:
            print(f"steadyrun demo: {problem}", file=sys.stderr)
            return 2
    else:
        tmp = Path(tempfile.mkdtemp(prefix="steadyrun-demo-"))
        files = DemoFiles.at(tmp / "demo.db")

    console = Console(highlight=False, color_system="auto" if color else None)
    if console.is_terminal or "COLUMNS" in os.environ:
        console.width = min(console.width, _MAX_WIDTH)
    else:
        console.width = _MAX_WIDTH  # a file or a pipe: no terminal to wrap for
    try:
        console.print(
            Text.assemble(
                (f"steadyrun {__version__} demo", "bold"),
                ": an order-support agent survives a crash mid-refund",
            )
        )
        if model is None:
            console.print(
                Text(
                    "No model configured: using a scripted model (steadyrun.testing.ScriptedModel)",
                    style="yellow",
                )
            )
        else:
            console.print(
                Text(
                    f"Model: {model}, a real model. It may not follow the demo's story (look "
                    "orders up, refund, get killed mid-refund, resume): the checks at the end "
                    "are reported, but only a failure of the demo itself fails its exit code.",
                    style="yellow",
                )
            )
        if tmp is None:
            kept = "--db: kept after the demo"
        elif keep:
            kept = "temporary, kept: --keep"
        else:
            kept = "temporary; --keep keeps it"
        console.print(Text(f"Store: a SQLite file, {files.db} ({kept})", "dim"))
        console.print(
            Text(
                f"Bank: a ledger file beside it, {files.ledger.name}: every refund and email "
                "appends a line (fsynced)",
                "dim",
            )
        )
        try:
            return asyncio.run(run_story(console, files, model=model))
        except DemoFailure as exc:
            lines = exc.stderr.rstrip().splitlines()[-_STDERR_LINES:]
            if lines:
                console.print(Text("the worker's stderr (last lines):", style="bold"))
                for line in lines:
                    console.print(Text(f"  {line}", style="dim"), overflow="fold")
            console.print(Text(f"demo failed: {exc}", style="bold red"))
            return 1
        except (SteadyrunError, TimeoutError, OSError) as exc:
            console.print(Text(f"demo failed: {type(exc).__name__}: {exc}", style="bold red"))
            return 1
    finally:
        if tmp is not None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _unusable(files: DemoFiles) -> str:
    """Why the demo cannot create its files there; empty when it can."""
    for path in (files.db, files.ledger):
        if path.exists():
            return (
                f"{path} exists already; the demo creates its files afresh: "
                "remove it or choose another --db path"
            )
    if not files.db.parent.is_dir():
        return f"--db {files.db}: there is no directory {files.db.parent}"
    return ""
