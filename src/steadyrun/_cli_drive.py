"""``steadyrun runs start|send|settle|resume``: drive a run from the command line.

``start`` records a run's first input with its agent's name (``Operations.start``: the same
request again is the same run), ``send`` appends a message to its feed (``Runtime.send``),
``settle`` records an awaited result or a reviewed call's outcome (``Runtime.settle``; the
top-level ``settle`` is the same command), ``resume`` continues it. With ``--wait`` (the
default of ``start``, ``send`` and ``resume``) the run executes in this process until it
suspends or ends, on the same claims as a ``serve`` or ``worker`` (one holding the run goes on
with it; this process then just reports); ``--no-wait`` leaves it to them: every write wakes
the run up in the store. A run waited for that ends ``failed`` exits with 3.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from steadyrun._cli_errors import busy
from steadyrun._cli_runs import (
    AppOpt,
    JsonOpt,
    StoreOpt,
    _done,
    _print,
    _with,
    need_agent,
    pending_table,
    usage,
)
from steadyrun._cli_target import Target, engine_host
from steadyrun._errors import NotPendingError, RunBusyError, RunCancelledError, RunNotFoundError
from steadyrun.records import RunSnapshot
from steadyrun.runtime import PendingItem
from steadyrun.runtime._claims import check_writable

if TYPE_CHECKING:
    from steadyrun.service._ops import Operations

__all__ = ["FAILED", "drive_commands"]

FAILED = 3
"""The exit code when a run the command waited for ended ``failed``."""

WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait/--no-wait",
        help="execute the run here until it suspends or ends (needs --app), or leave it to a "
        "serve or worker",
    ),
]


def ops_of(t: Target) -> Operations:
    """The ``Operations`` ``--app`` named, or one on the target's runtime."""
    from steadyrun.service._ops import Operations  # the service package loads on first use

    return t.app if isinstance(t.app, Operations) else Operations(t.runtime)


def drive_commands(group: typer.Typer, cli: typer.Typer) -> None:
    """Add ``start``, ``send``, ``settle``, ``resume`` to ``group``; ``settle`` to ``cli`` too."""

    @group.command(
        help="Start a run of AGENT (from --app) with INPUT; the same request again is the same run."
    )
    def start(
        agent: Annotated[str, typer.Argument(metavar="AGENT")],
        input: Annotated[str, typer.Argument(metavar="INPUT")],
        run_id: Annotated[
            str | None, typer.Option("--run-id", help="the run's id (default: a new one)")
        ] = None,
        wait: WaitOpt = True,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        rid = run_id or f"run-{uuid.uuid4().hex[:12]}"

        async def go(t: Target) -> int:
            need_agent(t, agent, "runs start")
            engine = getattr(t.app, "engine", None)
            if engine is not None and engine.name == "temporal":  # --app's App is on Temporal
                started = await t.app.start(rid, agent, input)
                if not wait:
                    extra = {"created": started.created, "status": started.status}
                    return _report(t, rid, None, json_out, extra)
                return await _rest_and_report(t, t.app, rid, json_out, {"created": started.created})
            started = await ops_of(t).start(rid, agent, input)
            extra = {"created": started.created}
            if not wait:
                snap = await t.store.load(rid)  # a run started before may have gone on
                status = snap.run.status if snap is not None else "started"
                return _report(t, rid, None, json_out, {**extra, "status": status})
            return await _drive_and_report(t, rid, json_out, extra)

        raise typer.Exit(_with(app, store, go))

    @group.command(help="Send a message (TEXT) to a run; it takes it at its next safe point.")
    def send(
        run_id: Annotated[str, typer.Argument(metavar="RUN")],
        text: Annotated[str, typer.Argument(metavar="TEXT")],
        message_id: Annotated[
            str | None,
            typer.Option("--id", help="the message's id: sent again, it is not added twice"),
        ] = None,
        wait: WaitOpt = True,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> int:
            snap = await _found(t, run_id)
            host = await engine_host(t, run_id)
            if host is not None:  # Temporal executes it: its workflow takes the message
                sent = await host.send(run_id, text, id=message_id)
                if not wait:
                    extra = {"message_id": sent.id, "status": "sent"}
                    return _report(t, run_id, None, json_out, extra)
                return await _await_and_report(t, host, run_id, sent.seq, json_out, sent.id)
            if snap is not None and snap.run.status == "cancelled":
                raise RunCancelledError(f"run {run_id!r} was cancelled; it takes no more input")
            if wait and snap is not None:
                need_agent(t, snap.run.agent, "runs send --wait")  # before anything is written
            sent = await t.runtime._append(run_id, text, id=message_id)  # snap checked above
            extra = {"message_id": sent.id}
            if not wait:
                return _report(t, run_id, None, json_out, {**extra, "status": "sent"})
            return await _drive_and_report(t, run_id, json_out, extra)

        raise typer.Exit(_with(app, store, go))

    @group.command(help="Continue a run: what it waited for is in, or it failed or crashed.")
    def resume(
        run_id: Annotated[str, typer.Argument(metavar="RUN")],
        wait: WaitOpt = True,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> int:
            snap = await _found(t, run_id)
            host = await engine_host(t, run_id)
            if host is not None:  # Temporal executes it: a failed run's workflow goes on
                await host.resume(run_id)
                if not wait:
                    return _report(t, run_id, None, json_out, {"status": "woken"})
                return await _rest_and_report(t, host, run_id, json_out, {})
            if snap is not None and snap.run.status == "cancelled":
                raise RunCancelledError(f"run {run_id!r} was cancelled; it is not resumed")
            if snap is not None and snap.run.status == "completed":
                waiting = await t.store.pending(run_id, snap.checkpoint.claimed_through)
            else:
                waiting = 1  # anything but a completed run has something to go on with
            if not waiting:
                raise NotPendingError(
                    f"run {run_id!r} completed and no message waits for it; continue it "
                    f"with `steadyrun runs send {run_id} TEXT`"
                )
            if not wait:
                await check_writable(t.store.leases, run_id)  # not a Temporal run
                await t.store.leases.wake(run_id)
                return _report(t, run_id, None, json_out, {"status": "woken"})
            if snap is not None:
                need_agent(t, snap.run.agent, "runs resume")
            return await _drive_and_report(t, run_id, json_out, {})

        raise typer.Exit(_with(app, store, go))

    settle_help = (
        "Record the outcome of a call the host owns: an awaited result, a call needing "
        "review, a detached call. RESULT is what the model sees (JSON or text)."
    )

    def settle(
        run_id: Annotated[str, typer.Argument(metavar="RUN")],
        call_id: Annotated[str, typer.Argument(metavar="CALL")],
        value: Annotated[str | None, typer.Argument(metavar="RESULT")] = None,
        result: Annotated[str | None, typer.Option(help="the result (the same as RESULT)")] = None,
        error: Annotated[str | None, typer.Option(help="why it failed (the model sees it)")] = None,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        if value is not None and result is not None:
            usage("give the result once: RESULT or --result")
        outcome = value if value is not None else result
        if (outcome is None) == (error is None):
            usage("give exactly one of RESULT (or --result) and --error")

        async def go(t: Target) -> None:
            host = await engine_host(t, run_id) or t.runtime
            record = await host.settle(run_id, call_id, result=outcome, error=error)
            _done(record.id, record.status, json_out)

        _with(app, store, go)

    group.command("settle", help=settle_help)(settle)
    cli.command("settle", help=f"{settle_help} The same as `runs settle`.")(settle)


async def _found(t: Target, run_id: str) -> RunSnapshot | None:
    """The run; ``None`` for a run started but not executed yet (its input waits)."""
    snap = await t.store.load(run_id)
    if snap is None and not await t.store.pending(run_id, 0):
        raise RunNotFoundError(run_id)
    return snap


async def _drive_and_report(t: Target, run_id: str, json_out: bool, extra: dict[str, Any]) -> int:
    try:
        await ops_of(t).drive(run_id)
    except RunBusyError as exc:
        # A serve or worker holds it: it goes on there (this command wrote what it had to).
        print(f"steadyrun: {busy(exc)}; it goes on there", file=sys.stderr)
    snap = await t.store.load(run_id)
    if snap is None:  # not executed yet: the executor holding it has not saved a step
        return _report(t, run_id, None, json_out, {"status": "started", **extra})
    return _report(t, run_id, snap, json_out, extra, pending=await t.runtime.pending(run_id))


async def _await_and_report(
    t: Target, host: Any, run_id: str, seq: int, json_out: bool, message_id: str
) -> int:
    """Wait for a run another engine executes to take message ``seq`` and come to rest."""
    while True:
        # The engine's view of the run may still be the one before the message: wait until
        # the stored run took it (or ended without it) first.
        snap = await t.store.load(run_id)
        ended = snap is not None and snap.run.status in ("failed", "cancelled")
        if snap is not None and (snap.checkpoint.claimed_through >= seq or ended):
            break
        await asyncio.sleep(0.05)
    await host.wait(run_id)
    snap = await t.store.load(run_id)
    pending = await t.runtime.pending(run_id)
    return _report(t, run_id, snap, json_out, {"message_id": message_id}, pending=pending)


async def _rest_and_report(
    t: Target, host: Any, run_id: str, json_out: bool, extra: dict[str, Any]
) -> int:
    """Wait for a run Temporal executes to come to rest, and report it as ``_drive_and_report``."""
    ended = await host.engine.rest(run_id)
    snap = await t.store.load(run_id)
    if ended is not None:
        # Its workflow ended otherwise than the store shows (terminated, say): failed.
        how = {"error": ended.error, "error_kind": ended.error_kind}
        if snap is None:
            return _report(t, run_id, None, json_out, {**extra, "status": "failed", **how})
        snap = replace(snap, run=replace(snap.run, status="failed", **how))
    if snap is None:
        return _report(t, run_id, None, json_out, {"status": "started", **extra})
    return _report(t, run_id, snap, json_out, extra, pending=await t.runtime.pending(run_id))


def _report(
    t: Target,
    run_id: str,
    snap: RunSnapshot | None,
    json_out: bool,
    extra: dict[str, Any],
    *,
    pending: list[PendingItem] | None = None,
) -> int:
    data: dict[str, Any] = {"run_id": run_id, **extra}
    if snap is not None:
        run = snap.run
        data.update(status=run.status, text=run.text, error=run.error, error_kind=run.error_kind)
        data["pending"] = [asdict(p) for p in pending or []]
    if json_out:
        _print(data)
    else:
        console = Console()
        console.print(f"[bold]{run_id}[/]: [bold]{data['status']}[/]")
        if snap is None and data.get("error"):
            console.print(f"[red]{data.get('error_kind')}: {data['error']}[/]")
        elif snap is None:
            console.print(f"a `steadyrun worker` or `serve` with this app executes it ({t.where})")
        elif snap.run.text:
            console.print(snap.run.text)
        if snap is not None and snap.run.error:
            console.print(f"[red]{snap.run.error_kind}: {snap.run.error}[/]")
        if pending:
            console.print(pending_table(pending))
    return FAILED if data["status"] == "failed" else 0
