"""``steadyrun inbox``: everything waiting for a person (or a system) across runs.

Runs are listed newest first (``RunIndex.list_runs``, paged by ``updated_before``) and each
one's ``Runtime.pending`` items are gathered: decisions, input requests, awaited results,
calls needing review (also on runs that completed: the run went on without the outcome),
detached calls, submissions and background tasks' questions. Cancelled runs wait for nothing.
It reads every listed run, so ``--agent`` and ``--run`` narrow the reading, ``--kind`` the
output.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, get_args

import typer
from rich.console import Console
from rich.table import Table

from steadyrun._cli_runs import AppOpt, JsonOpt, StoreOpt, _print, _with, usage
from steadyrun._cli_target import Target
from steadyrun.runtime._host import PendingKind

__all__ = ["KINDS", "inbox_command"]

KINDS = get_args(PendingKind)
"""The kinds of pending items, as ``--kind`` takes them."""

_PAGE = 200  # runs read per listing


def inbox_command(cli: typer.Typer) -> None:
    """Add ``inbox`` to ``cli``."""

    @cli.command(
        help="Everything waiting for a person across runs: approvals (decision), input "
        "requests (input), awaited results (result), calls needing review (review), and "
        "detached, submitted and task_input items."
    )
    def inbox(
        kind: Annotated[
            list[str] | None,
            typer.Option(help=f"only this kind (repeat): {', '.join(KINDS)}"),
        ] = None,
        agent: Annotated[str | None, typer.Option(help="only runs of this agent")] = None,
        run: Annotated[
            str | None, typer.Option(metavar="PREFIX", help="only runs whose id starts so")
        ] = None,
        limit: Annotated[int, typer.Option(help="at most this many items")] = 100,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        wanted = set(kind or KINDS)
        if not wanted <= set(KINDS):
            wrong = ", ".join(sorted(wanted - set(KINDS)))
            usage(f"--kind is one of {', '.join(KINDS)}, not {wrong}")

        async def go(t: Target) -> None:
            items = await _gather(t, wanted, agent, run, limit)
            if json_out:
                _print(items)
                return
            table = Table("run", "agent", "kind", "call", "tool", "wait id", "prompt")
            for i in items:
                table.add_row(
                    i["run_id"], i["agent"], i["kind"], i["call_id"], i["name"],
                    i["wait_id"] or "", i["prompt"] or "",
                )  # fmt: skip
            Console().print(table)

        _with(app, store, go)


async def _gather(
    t: Target, kinds: set[str], agent: str | None, prefix: str | None, limit: int
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    before: datetime | None = None
    while len(found) < limit:
        page = await t.store.list_runs(agent=agent, updated_before=before, limit=_PAGE)
        for summary in page:
            if summary.run_id in seen or summary.status == "cancelled":
                continue
            seen.add(summary.run_id)
            if prefix is not None and not summary.run_id.startswith(prefix):
                continue
            for item in await t.runtime.pending(summary.run_id):
                if item.kind in kinds:
                    found.append(
                        {
                            "run_id": summary.run_id,
                            "agent": summary.agent,
                            "run_status": summary.status,
                            "updated_at": summary.updated_at,
                            **asdict(item),
                        }
                    )
        if len(page) < _PAGE or page[-1].updated_at is None:
            break
        before = page[-1].updated_at
    return found[:limit]
