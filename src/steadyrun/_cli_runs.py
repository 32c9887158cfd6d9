"""The ``steadyrun runs list|show|tail|cancel``, ``pending`` and ``approve|reject|answer`` commands.

``runs export|import|delete`` live in ``steadyrun._cli_lifecycle``, ``runs history|fork`` in
``steadyrun._cli_history``, ``runs start|send|settle|resume`` in ``steadyrun._cli_drive`` and
``inbox`` in ``steadyrun._cli_inbox``; ``steadyrun._cli`` adds them (they import the options and
helpers of this module). Errors leave ``_with`` in the command's terms (``_cli_errors``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from steadyrun._cli_errors import USAGE, CommandFailed, CommandLineError, explain
from steadyrun._cli_tail import tail_run
from steadyrun._cli_target import Target, engine_host, load_target
from steadyrun._errors import RunNotFoundError, SteadyrunError
from steadyrun.records import RunSnapshot, RunStatus
from steadyrun.runtime import PendingItem

__all__ = [
    "AppOpt",
    "CreateOpt",
    "JsonOpt",
    "StoreOpt",
    "fail",
    "need_agent",
    "pending_table",
    "run_json",
    "runs",
    "usage",
    "write_commands",
]

AppOpt = Annotated[
    str | None,
    typer.Option("--app", metavar="MODULE:ATTR", help="object with the agents and the store"),
]
StoreOpt = Annotated[
    str | None,
    typer.Option("--store", metavar="URL", help="sqlite:PATH or postgresql://... (no agents)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]
CreateOpt = Annotated[
    bool, typer.Option("--create", help="make the SQLite file of --store if it is not there")
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` to stderr and exit with ``code`` (1: the operation failed)."""
    print(f"steadyrun: {message}", file=sys.stderr)
    raise typer.Exit(code)


def usage(message: str) -> NoReturn:
    """Print ``message`` to stderr and exit with 2: the command line is wrong."""
    fail(message, USAGE)


def _with(
    app: str | None,
    store: str | None,
    fn: Callable[[Target], Awaitable[Any]],
    *,
    create: bool = False,
) -> Any:
    async def go() -> Any:
        target = await load_target(app, store, create=create)
        try:
            return await fn(target)
        except RunNotFoundError as exc:
            if await target.store.pending(exc.run_id, 0):  # started, its input waiting
                raise CommandFailed(
                    1,
                    f"RunNotFoundError: run {exc.run_id!r} is started but nothing executed it "
                    f"yet; `steadyrun runs resume {exc.run_id}` or a worker with the app does",
                ) from exc
            raise explain(exc, where=target.where, app=target.spec) from exc
        except SteadyrunError as exc:
            raise explain(exc, where=target.where, app=target.spec) from exc
        finally:
            await target.store.close()

    return asyncio.run(go())


def _encode(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _print(data: Any) -> None:
    print(json.dumps(data, default=_encode, ensure_ascii=False, indent=None))


def need_agent(t: Target, name: str, why: str) -> None:
    """Raise a ``CommandLineError`` unless the target knows agent ``name`` (``why`` needs it)."""
    known = t.runtime._agents
    if name in known:
        return
    if t.spec is None:
        raise CommandLineError(f"{why} needs agent {name!r}: name the app that has it with --app")
    has = ", ".join(sorted(known)) or "no agents"
    raise CommandLineError(f"agent {name!r} is not in --app {t.spec} (it has: {has})")


def pending_table(items: list[PendingItem]) -> Table:
    """What a run waits for, as a table."""
    table = Table("kind", "call", "tool", "wait id", "prompt")
    for i in items:
        table.add_row(i.kind, i.call_id, i.name, i.wait_id or "", i.prompt or "")
    return table


def run_json(snap: RunSnapshot, pending: list[Any]) -> dict[str, Any]:
    """Everything of a run for ``--json``: its row, every call record, messages, what waits."""
    data = asdict(snap.run)
    data["calls"] = [asdict(c) for c in snap.calls]
    data["messages"] = [{**asdict(m), "text": m.text} for m in snap.context]
    data["pending"] = [asdict(p) for p in pending]
    return data


def runs() -> typer.Typer:
    """The ``runs`` command group."""
    group = typer.Typer(no_args_is_help=True)

    @group.command("list", help="Runs by last activity, newest first.")
    def list_(
        app: AppOpt = None,
        store: StoreOpt = None,
        status: Annotated[str | None, typer.Option(help="only runs with this status")] = None,
        agent: Annotated[str | None, typer.Option(help="only runs of this agent")] = None,
        limit: Annotated[int, typer.Option(help="at most this many")] = 50,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            found = await t.store.list_runs(status=_status(status), agent=agent, limit=limit)
            if json_out:
                _print([asdict(s) for s in found])
                return
            table = Table("run", "agent", "status", "steps", "updated")
            for s in found:
                table.add_row(s.run_id, s.agent, s.status, str(s.steps), str(s.updated_at or ""))
            Console().print(table)

        _with(app, store, go)

    @group.command(
        help="A run: status, answer, calls; --json: everything (calls with results, decisions "
        "and answers, the messages, what it waits for)."
    )
    def show(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            snap = await t.store.load(run_id)
            if snap is None:
                raise RunNotFoundError(run_id)
            if json_out:
                _print(run_json(snap, await t.runtime.pending(run_id)))
                return
            run = snap.run
            console = Console()
            console.print(f"[bold]{run.run_id}[/] ({run.agent}): [bold]{run.status}[/]")
            if run.text:
                console.print(run.text)
            if run.error:
                console.print(f"[red]{run.error_kind}: {run.error}[/]")
            table = Table("call", "tool", "status", "arguments", "outcome")
            for c in snap.calls:
                outcome = c.result if c.error is None else f"error: {c.error}"
                if c.decision is not None:
                    said = "approved" if c.decision.approve else "rejected"
                    who = f" by {c.decision.decided_by}" if c.decision.decided_by else ""
                    outcome = f"{said}{who}; {outcome or ''}"
                table.add_row(c.id, c.name, c.status, c.arguments[:60], (outcome or "")[:60])
            console.print(table)

        _with(app, store, go)

    @group.command(
        help="Follow a run: print the model's words as they are written and its calls as "
        "they change, until it stops."
    )
    def tail(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        interval: Annotated[
            float, typer.Option(help="seconds between looks when no live feed reaches here")
        ] = 2.0,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            await tail_run(t, run_id, interval, json_out)

        _with(app, store, go)

    @group.command(help="Cancel a run, its open calls and its sub-agent runs.")
    def cancel(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        grace: Annotated[
            float, typer.Option(help="seconds a running call's body may take to end")
        ] = 10.0,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            from steadyrun.service._ops import Operations

            host = await engine_host(t, run_id)
            if host is not None:  # Temporal executes it: its workflow cancels it
                done = await host.cancel(run_id)
                if not done.runs:
                    done = await host.cancelled(run_id)
            else:
                # Revoking the claim fences out the executor of the run in any process; a body
                # running there may end (and is recorded as it ended) within the grace.
                ops = Operations(t.runtime, leases=t.store.leases)
                done = await ops.cancel(run_id, grace=grace)
            if json_out:
                _print(asdict(done))
            else:
                print(f"cancelled {len(done.runs)} run(s), {len(done.calls)} call(s)")

        _with(app, store, go)

    return group


def write_commands(cli: typer.Typer) -> None:
    """Add ``pending``, ``approve``, ``reject`` and ``answer`` to ``cli``."""

    @cli.command(help="What a run waits for: decisions, inputs, results.")
    def pending(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            items = await t.runtime.pending(run_id)
            if json_out:
                _print([asdict(i) for i in items])
                return
            Console().print(pending_table(items))

        _with(app, store, go)

    @cli.command(help="Approve a call waiting for a decision.")
    def approve(
        run_id: str,
        call_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        arguments: Annotated[
            str | None, typer.Option(help="edited arguments (JSON; needs --app)")
        ] = None,
        by: Annotated[str | None, typer.Option(help="who decided")] = None,
        json_out: JsonOpt = False,
    ) -> None:
        _decide(app, store, run_id, call_id, True, None, arguments, by, json_out)

    @cli.command(help="Reject a call waiting for a decision; the model sees the reason.")
    def reject(
        run_id: str,
        call_id: str,
        reason: Annotated[str, typer.Option(help="why (the model sees it)")],
        app: AppOpt = None,
        store: StoreOpt = None,
        by: Annotated[str | None, typer.Option(help="who decided")] = None,
        json_out: JsonOpt = False,
    ) -> None:
        _decide(app, store, run_id, call_id, False, reason, None, by, json_out)

    @cli.command(help="Answer an input request by its wait id (RESPONSE is JSON).")
    def answer(
        run_id: str,
        wait_id: str,
        response: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        try:
            value = json.loads(response)
        except json.JSONDecodeError as exc:
            usage(f"RESPONSE is not JSON: {exc} (a text is quoted: '\"red\"')")

        async def go(t: Target) -> None:
            host = await engine_host(t, run_id) or t.runtime
            record = await host.answer(run_id, wait_id, value)
            _done(record.id, record.status, json_out)

        _with(app, store, go)


def _decide(
    app: str | None,
    store: str | None,
    run_id: str,
    call_id: str,
    approve: bool,
    reason: str | None,
    arguments: str | None,
    by: str | None,
    json_out: bool,
) -> None:
    if arguments is not None:
        try:
            json.loads(arguments)
        except json.JSONDecodeError as exc:
            usage(f"--arguments is not JSON: {exc}")

    async def go(t: Target) -> None:
        if arguments is not None:
            # Edited arguments are checked against the tool of the run's agent.
            snap = await t.store.load(run_id)
            if snap is None:
                raise RunNotFoundError(run_id)
            need_agent(t, snap.run.agent, "--arguments")
        host = await engine_host(t, run_id)
        if host is not None:  # Temporal executes it: the decision goes to its workflow
            parsed = json.loads(arguments) if arguments is not None else None
            record = await host.decide(
                run_id, call_id, approve=approve, reason=reason, arguments=parsed, decided_by=by
            )
        else:
            record = await t.runtime.decide(
                run_id, call_id, approve=approve, reason=reason, arguments=arguments, decided_by=by
            )
        _done(record.id, record.status, json_out)

    _with(app, store, go)


def _done(call_id: str, status: str, json_out: bool) -> None:
    if json_out:
        _print({"call": call_id, "status": status})
    else:
        print(f"{call_id}: {status} (`steadyrun runs resume` or a worker continues the run)")


def _status(value: str | None) -> RunStatus | None:
    allowed = ("running", "suspended", "completed", "failed", "cancelled")
    if value is not None and value not in allowed:
        usage(f"--status is one of {', '.join(allowed)}")
    return value  # type: ignore[return-value]
