"""The demo's story, told by the parent process.

Start worker 1 on the SQLite file, SIGKILL it once its refund moved the money, show what the
file holds, resume the run in worker 2 (a new process), then verify from the file and the
ledger. The workers print the live timeline; the parent relays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from rich.console import Console
from rich.text import Text

from steadyrun._demo._shop import RUN_ID, Shop
from steadyrun._demo._show import Narrator, answer_panel, call_table, status_text, usage_line
from steadyrun._demo._worker import CONTROL, worker_command
from steadyrun.records import RunSnapshot
from steadyrun.stores import SqliteStore

__all__ = ["DemoFailure", "DemoFiles", "run_story"]

T = TypeVar("T")

_TIMEOUT = 30.0  # seconds for each wait on a worker or the store; the demo takes about two
_REAL_TIMEOUT = 600.0  # the same with a real model: a local one on a small CPU is slow
_REAP = 10.0  # seconds to wait for a killed worker to be gone

_HINTS = {
    "running": "started: the store cannot know whether it took effect",
    "queued": "never started: without a concurrency key it runs alone, after refund",
}


class DemoFailure(Exception):
    """The demo could not tell its story: a worker failed, hung, or the store was unreadable.

    Attributes:
        stderr: What the failing worker wrote to its standard error, if anything.
    """

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


@dataclass(frozen=True)
class DemoFiles:
    """Where the demo keeps its run (a SQLite file) and its bank (a ledger file beside it)."""

    db: Path
    ledger: Path

    @classmethod
    def at(cls, db: Path) -> DemoFiles:
        """The files for the SQLite file ``db``."""
        db = db.absolute()
        return cls(db=db, ledger=db.with_name(f"{db.stem}-bank.jsonl"))


@dataclass
class _Worker:
    number: int
    proc: asyncio.subprocess.Process
    stderr: asyncio.Task[bytes]
    timeout: float
    events: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"worker {self.number} (pid {self.proc.pid})"

    async def stderr_text(self) -> str:
        """Its standard error, once it is gone."""
        with contextlib.suppress(TimeoutError):
            return (await asyncio.wait_for(asyncio.shield(self.stderr), _REAP)).decode(
                "utf-8", "replace"
            )
        return ""

    async def within(self, step: Awaitable[T], doing: str) -> T:
        """``step``, or kill the worker and fail when it takes longer than ``timeout``."""
        try:
            return await asyncio.wait_for(step, self.timeout)
        except TimeoutError:
            await self.reap()
            raise DemoFailure(
                f"{self.name} did not {doing} within {self.timeout:g} s; it was killed",
                await self.stderr_text(),
            ) from None

    async def reap(self) -> None:
        """Kill the worker if it still runs, and wait for it."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), _REAP)
        await self.stderr_text()  # drain its stderr, so nothing is left reading after the demo


async def _start(
    number: int,
    mode: Literal["run", "resume"],
    files: DemoFiles,
    console: Console,
    model: str | None,
) -> _Worker:
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"  # its stderr; its stdout follows the console's encoding
    proc = await asyncio.create_subprocess_exec(
        *worker_command(
            mode,
            db=files.db,
            ledger=files.ledger,
            width=console.width,
            color_system=console.color_system,
            encoding=console.encoding,
            model=model,
        ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    timeout = _TIMEOUT if model is None else max(_TIMEOUT, _REAL_TIMEOUT)
    return _Worker(number, proc, asyncio.ensure_future(proc.stderr.read()), timeout)


async def _relay(worker: _Worker, console: Console, *, until: str | None = None) -> bool:
    """Copy the worker's timeline to the console until it sends ``until`` (True) or ends."""
    stdout = worker.proc.stdout
    assert stdout is not None
    while raw := await stdout.readline():
        line = raw.decode(console.encoding, "replace")
        if line.startswith(CONTROL):
            try:
                event = json.loads(line[len(CONTROL) :])
            except ValueError:
                raise DemoFailure(f"{worker.name} sent a garbled control line") from None
            worker.events[event["event"]] = event
            if event["event"] == until:
                return True
        else:
            console.file.write(line)
            console.file.flush()
    return False


def _kill(worker: _Worker) -> str:
    """Kill the worker the hard way: no cleanup, no last words, as a crash would."""
    if sys.platform == "win32":  # pragma: no cover - no signals there
        worker.proc.kill()
        return "TerminateProcess"
    os.kill(worker.proc.pid, signal.SIGKILL)
    return "SIGKILL"


async def _load(files: DemoFiles) -> RunSnapshot | None:
    """Read the run from the SQLite file with a store of this (the parent) process."""

    async def read() -> RunSnapshot | None:
        async with SqliteStore(files.db) as store:
            return await store.load(RUN_ID)

    try:
        return await asyncio.wait_for(read(), _TIMEOUT)
    except TimeoutError:
        raise DemoFailure(f"reading {files.db} took longer than {_TIMEOUT:g} s") from None


@dataclass
class _Outcome:
    crashed: bool
    snapshot: RunSnapshot | None
    shop: Shop
    observer_errors: int
    real_model: bool = False


async def run_story(console: Console, files: DemoFiles, *, model: str | None = None) -> int:
    """Tell the whole story on ``console``; 0 when every invariant held, 1 otherwise.

    With a real ``model`` (a spec the workers resolve), the invariants are reported but only a
    failure of the demo itself (a worker that failed or hung, the printer) returns 1.
    """
    narrator = Narrator(console)
    shop = Shop(files.ledger)
    db = files.db.name
    real = model is not None

    worker = await _start(1, "run", files, console, model)
    try:
        narrator.section(
            f"process 1 (pid {worker.proc.pid}): "
            f"Runtime(SqliteStore({db!r})).run(agent, run_id={RUN_ID!r})"
        )
        moved = await worker.within(_relay(worker, console, until="moved"), "reach the refund")
        how = _kill(worker) if moved else ""
        code = await worker.within(worker.proc.wait(), "exit")
        await worker.within(_relay(worker, console), "close its output")
    finally:
        await worker.reap()
    reported = worker.events.get("moved", worker.events.get("done", {}))
    errors = int(reported.get("observer_errors", 0))
    if not moved:
        if code != 0 or "done" not in worker.events:
            raise DemoFailure(
                f"{worker.name} exited with code {code} before the refund",
                await worker.stderr_text(),
            )
        if real:
            narrator.line(
                "",
                Text(
                    f"the model finished without moving money ({_status(worker)}): there was "
                    "no refund to crash in, so nothing to resume",
                    "dim",
                ),
            )
            snap = await _load(files)
            if snap is not None:
                _summary(narrator, snap, shop, files, real=True)
            return _verify(narrator, _Outcome(False, snap, shop, errors, real))
        return _verify(narrator, _Outcome(False, None, shop, errors))
    crashed = code != 0 if how != "SIGKILL" else code == -signal.SIGKILL
    narrator.line(
        "CRASH",
        f"{worker.name} killed with {how} (returncode {code}) inside refund: "
        "the money moved, its result was never saved",
        style="bold red",
    )

    snap = await _load(files)
    if snap is None:
        raise DemoFailure(f"{files.db} holds no run {RUN_ID!r} after the crash")
    batch = ", ".join(snap.checkpoint.batch)
    narrator.section(f"what {db} holds after the crash (read by the parent)")
    narrator.line(
        "run",
        f"{RUN_ID}: {snap.run.status}; last checkpoint: model call "
        f"m{snap.checkpoint.model_calls} and its open batch ({batch})",
    )
    for record in snap.calls:
        note = _HINTS.get(record.status)
        if note is not None:
            narrator.line(
                record.id,
                Text(f"{record.name}  ")
                .append(status_text(record.status))
                .append(f"  {note}", "dim"),
            )

    worker = await _start(2, "resume", files, console, model)
    try:
        narrator.section(
            f"process 2 (pid {worker.proc.pid}): a new Runtime on the same file: resume({RUN_ID!r})"
        )
        done = f"m1-m{snap.checkpoint.model_calls}"
        note = f"model calls {done} are not made again: the run goes on from its checkpoint"
        narrator.line("", Text(note, "dim"))
        await worker.within(_relay(worker, console), "finish the run")
        code = await worker.within(worker.proc.wait(), "exit")
    finally:
        await worker.reap()
    if code != 0 or "done" not in worker.events:
        raise DemoFailure(f"{worker.name} exited with code {code}", await worker.stderr_text())
    errors += int(worker.events["done"].get("observer_errors", 0))

    final = await _load(files)
    if final is not None:
        _summary(narrator, final, shop, files, real=real)
    return _verify(narrator, _Outcome(crashed, final, shop, errors, real))


def _status(worker: _Worker) -> str:
    """The run status a worker reported at its end."""
    return f"run {worker.events.get('done', {}).get('status', 'unknown')}"


def _summary(
    narrator: Narrator, snap: RunSnapshot, shop: Shop, files: DemoFiles, *, real: bool = False
) -> None:
    console = narrator.console
    narrator.section(f"the run, as stored in {files.db.name}")
    call_table(snap.calls, narrator)
    if snap.run.text:
        console.print(answer_panel(snap.run.text))
    elif snap.run.error is not None:
        console.print(Text(f"run {snap.run.status}: {snap.run.error}", style="bold red"))
    narrator.line("usage", usage_line(snap.run.usage, scripted=not real))
    count = len(shop.refunds("A-1001"))
    narrator.line(
        "ledger",
        f"{files.ledger.name}: refund body for A-1001 executed {count} "
        f"time{'s' if count != 1 else ''}; emails sent: {len(shop.outbox())}",
    )


def _verify(narrator: Narrator, outcome: _Outcome) -> int:
    sym, console = narrator.sym, narrator.console
    snap = outcome.snapshot
    calls = {c.name: c for c in snap.calls if c.model_call_id == "m2"} if snap else {}
    refund, email = calls.get("refund"), calls.get("send_email")
    checks = [
        ("crash mid-batch", outcome.crashed),
        ("refund ran once", len(outcome.shop.refunds("A-1001")) == 1),
        ("completed", snap is not None and snap.run.status == "completed"),
        ("refund needs_review", refund is not None and refund.status == "needs_review"),
        ("email sent", email is not None and email.status == "succeeded"),
    ]
    line = Text()
    for i, (label, ok) in enumerate(checks):
        if i:
            line.append("  ")
        line.append(f"{sym.ok if ok else sym.bad} {label}", style="green" if ok else "bold red")
    narrator.line("checks", line)
    failed = [label for label, ok in checks if not ok]
    if failed and outcome.real_model:
        # A real model tells its own story: the script's invariants are not the demo's to keep.
        console.print(
            Text(
                f"not as scripted: {'; '.join(failed)}. A real model decides its own calls; "
                "with it these checks are reported, not enforced.",
                style="yellow",
            )
        )
        failed = []
    if outcome.observer_errors:
        # The timeline printer is an observer; the run isolates its errors, the demo must not.
        failed.append(f"the timeline printer raised {outcome.observer_errors} time(s)")
    if failed:
        console.print(Text(f"demo failed: {'; '.join(failed)}", style="bold red"))
        return 1
    return 0
