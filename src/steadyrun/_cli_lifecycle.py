"""``steadyrun runs export|import|delete``: move runs between stores, and delete them.

``export RUN [--out FILE]`` writes the run, its sub-agent runs and their input as one
versioned JSON document (to stdout without ``--out``); ``import FILE...`` writes such
documents into the store (``-`` reads stdin); ``delete RUN`` deletes a run tree (with its
background tasks when ``--app`` names an ``Operations`` that has them). See docs/lifecycle.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from steadyrun._cli_drive import ops_of
from steadyrun._cli_runs import AppOpt, CreateOpt, JsonOpt, StoreOpt, _print, _with, usage
from steadyrun._cli_target import Target, engine_host
from steadyrun._errors import RunNotFoundError

if TYPE_CHECKING:
    from steadyrun.service._ops import Operations

__all__ = ["lifecycle_commands"]


def _ops(t: Target) -> Operations:
    # An Operations named by --app knows the background tasks deleted with a run.
    return ops_of(t)


def _read(name: str) -> str:
    return sys.stdin.read() if name == "-" else Path(name).read_text("utf-8")


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a crash leaves no half document)."""
    folder = path.resolve().parent
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def lifecycle_commands(group: typer.Typer) -> None:
    """Add ``export``, ``import`` and ``delete`` to the ``runs`` command group."""

    @group.command(help="Export a run (and its sub-agent runs and input) as one JSON document.")
    def export(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        out: Annotated[
            Path | None, typer.Option("--out", metavar="FILE", help="write here, not to stdout")
        ] = None,
    ) -> None:
        async def go(t: Target) -> None:
            document = await _ops(t).export_run(run_id)
            text = json.dumps(document, ensure_ascii=False) + "\n"
            if out is None:
                sys.stdout.write(text)
                return
            _write_atomically(out, text)
            runs = len(document["runs"])
            print(f"exported run {run_id} ({runs} runs) to {out}", file=sys.stderr)

        _with(app, store, go)

    @group.command("import", help="Import exported runs (FILE may be - for stdin).")
    def import_(
        files: Annotated[list[str], typer.Argument(metavar="FILE...")],
        app: AppOpt = None,
        store: StoreOpt = None,
        create: CreateOpt = False,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            texts = []  # read once the store is found: a wrong --store reads nothing
            for name in files:
                try:
                    texts.append(await asyncio.to_thread(_read, name))
                except OSError as exc:
                    usage(f"cannot read {name}: {exc}")
            ops = _ops(t)
            done = []
            for text in texts:  # one by one: each run is imported whole or not at all
                imported = await ops.import_run(text)
                done.append(imported)
                if not json_out:
                    print(f"imported run {imported.run_id} ({len(imported.runs)} runs)")
            if json_out:
                _print([asdict(i) for i in done])

        _with(app, store, go, create=create)

    @group.command(help="Delete a run, its sub-agent runs, input, claim and tasks.")
    def delete(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            host = await engine_host(t, run_id)
            if host is not None:  # Temporal executes it: its workflow goes with it
                from steadyrun.service._ops import Operations

                deleted = await Operations(t.runtime, engine=host.engine).delete(run_id)
            else:
                deleted = await _ops(t).delete(run_id)
            if not deleted.found:
                raise RunNotFoundError(run_id)
            if json_out:
                _print(asdict(deleted))
                return
            print(
                f"deleted run {run_id}: {len(deleted.runs)} runs, {deleted.messages} input "
                f"messages, {deleted.tasks} tasks"
            )

        _with(app, store, go)
