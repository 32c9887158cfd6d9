"""``steadyrun runs history|fork``: a run's steps, and a new run made from one of them.

``history RUN`` lists the steps (safe points) with what each added; ``fork RUN --at K --as
NEW`` makes a new run from step K (``--edit TEXT`` replaces its last message keeping its role;
``--edit-calls JSON`` makes it a model response with those tool calls, which needs ``--app``
for the agent's tools) and wakes it for a worker unless ``--no-resume``. See docs/lifecycle.md.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from steadyrun._cli_runs import AppOpt, JsonOpt, StoreOpt, _print, _with, need_agent, usage
from steadyrun._cli_target import Target
from steadyrun._errors import RunNotFoundError
from steadyrun.chat import Message, Part, TextPart, ToolCallPart
from steadyrun.runtime import HistoryStep

__all__ = ["history_commands"]

_SHOWN = 60  # characters of a message shown in the table


def history_commands(group: typer.Typer) -> None:
    """Add ``history`` and ``fork`` to the ``runs`` group."""

    @group.command(help="A run's steps (safe points), each with the messages and calls it added.")
    def history(
        run_id: str,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        async def go(t: Target) -> None:
            steps = await t.runtime.history(run_id)
            if json_out:
                _print([_step_json(s) for s in steps])
                return
            table = Table("step", "status", "next", "added", "calls")
            for s in steps:
                calls = ", ".join(f"{c.id} {c.name} {c.status}" for c in s.calls)
                table.add_row(str(s.step), s.status, s.phase, _added(s), calls)
            Console().print(table)

        _with(app, store, go)

    @group.command(help="Make a new run from step K of RUN; a worker continues it.")
    def fork(
        run_id: str,
        at: Annotated[int, typer.Option("--at", metavar="K", help="the step to fork from")],
        new_run_id: Annotated[str, typer.Option("--as", metavar="NEW", help="the new run's id")],
        edit: Annotated[
            str | None,
            typer.Option(help="replace the step's last message with this text (same role)"),
        ] = None,
        edit_calls: Annotated[
            str | None,
            typer.Option(
                "--edit-calls",
                metavar="JSON",
                help='replace the model response with these calls: [{"name", "arguments"}]',
            ),
        ] = None,
        resume: Annotated[
            bool, typer.Option("--resume/--no-resume", help="wake the new run for a worker")
        ] = True,
        app: AppOpt = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        replacement = _edit(edit, edit_calls)

        async def go(t: Target) -> None:
            if edit_calls is not None:  # the calls are checked against the agent's tools
                snap = await t.store.load(run_id)
                if snap is None:
                    raise RunNotFoundError(run_id)
                need_agent(t, snap.run.agent, "--edit-calls")
            forked = await t.runtime.fork(run_id, at=at, new_run_id=new_run_id, edit=replacement)
            if resume and forked.status == "suspended":
                await t.store.leases.wake(forked.run_id)  # a serve or worker continues it
            if json_out:
                _print(asdict(forked))
                return
            made = "forked" if forked.created else "already forked"
            print(f"{made} {run_id} at step {at} as {forked.run_id} ({forked.status})")

        _with(app, store, go)


def _edit(text: str | None, calls: str | None) -> Message | str | None:
    if calls is None:
        return text
    try:
        found = json.loads(calls)
    except json.JSONDecodeError as exc:
        usage(f"--edit-calls is not JSON: {exc}")
    if not isinstance(found, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in found
    ):
        usage('--edit-calls is a JSON list of {"name": ..., "arguments": {...}}')
    parts: list[Part] = [TextPart(text=text)] if text else []
    parts += [
        ToolCallPart(call_id="", name=c["name"], arguments=json.dumps(c.get("arguments") or {}))
        for c in found
    ]
    return Message(role="assistant", parts=parts)


def _step_json(step: HistoryStep) -> dict[str, Any]:
    model_call = f"m{step.model_calls}" if not step.rewrote else None
    return {
        "step": step.step,
        "at": step.at.isoformat() if step.at is not None else None,
        "status": step.status,
        "phase": step.phase,
        "turn": step.turn,
        "rewrote": step.rewrote,
        "context_length": step.context_length,
        "messages": [
            {
                "role": m.role,
                "text": m.text,
                "tool_calls": [
                    {
                        "id": f"{model_call}.c{i + 1}" if model_call else p.call_id,
                        "name": p.name,
                        "arguments": p.arguments,
                    }
                    for i, p in enumerate(m.tool_calls)
                ],
            }
            for m in step.messages
        ],
        "calls": [{"id": c.id, "name": c.name, "status": c.status} for c in step.calls],
        "usage": asdict(step.usage),
        "text": step.text,
        "error": step.error,
        "forked_from": list(step.forked_from) if step.forked_from is not None else None,
    }


def _added(step: HistoryStep) -> str:
    if step.rewrote:
        return f"(the context rewritten: {len(step.messages)} messages)"
    lines = []
    for m in step.messages:
        calls = ", ".join(f"{p.name}({p.arguments})" for p in m.tool_calls)
        said = " ".join(m.text.split()) or calls or " ".join(_results(m))
        lines.append(f"{m.role}: {said[:_SHOWN]}")
    return "\n".join(lines)


def _results(message: Message) -> list[str]:
    return [getattr(p, "content", "") for p in message.parts]
