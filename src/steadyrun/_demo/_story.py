"""The demo's story: run, crash mid-batch, restart on the same store, resume, verify."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from steadyrun._demo._shop import (
    CUSTOMER,
    INSTRUCTIONS,
    Shop,
    after_restart_script,
    before_crash_script,
    make_tools,
)
from steadyrun._demo._show import (
    Narrator,
    answer_panel,
    call_table,
    status_text,
    usage_line,
)
from steadyrun.runtime import Agent, RunResult, Runtime
from steadyrun.stores import MemoryStore

__all__ = ["RUN_ID", "run_story"]

RUN_ID = "ticket-4711"
AGENT = "order-support"
_TIMEOUT = 30.0  # seconds; the demo takes well under one


_HINTS = {
    "running": "started: the store cannot know whether it took effect",
    "queued": "never started: without a concurrency key it runs alone, after refund",
}


@dataclass
class _Outcome:
    crashed: bool
    result: RunResult | None
    shop: Shop


async def run_story(console: Console) -> int:
    """Tell the whole story on ``console``; 0 when every invariant held, 1 otherwise."""
    narrator = Narrator(console)
    shop = Shop(notify=lambda line: narrator.line("", Text(line, style="bold blue")))
    store = MemoryStore()

    narrator.section("process 1: Runtime(MemoryStore()).run(agent, run_id='ticket-4711')")
    narrator.line("user", Text(CUSTOMER, style="italic"))
    crash = asyncio.Event()
    first = Runtime(store, observers=[narrator])
    agent = Agent(
        name=AGENT,
        model=before_crash_script(),
        instructions=INSTRUCTIONS,
        tools=make_tools(shop, crash),
    )
    task = asyncio.create_task(first.run(agent, run_id=RUN_ID, input=CUSTOMER))
    crashed = await _crash_when_signalled(task, crash)
    if not crashed:
        return _verify(narrator, _Outcome(crashed=False, result=None, shop=shop))
    narrator.line(
        "CRASH",
        "the process dies inside refund: the money moved, its result was never saved",
        style="bold red",
    )

    snap = await store.load(RUN_ID)
    if snap is not None:
        batch = ", ".join(snap.checkpoint.batch)
        narrator.section("what the store holds after the crash")
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

    narrator.section("process 2: a new Runtime on the same store: resume('ticket-4711')")
    if snap is not None:
        done = f"m1-m{snap.checkpoint.model_calls}"
        note = f"model calls {done} are not made again: the run goes on from its checkpoint"
        narrator.line("", Text(note, "dim"))
    second = Runtime(store, observers=[narrator])
    restarted = Agent(
        name=AGENT,
        model=after_restart_script(),
        instructions=INSTRUCTIONS,
        tools=make_tools(shop),
    )
    result = await asyncio.wait_for(second.resume(RUN_ID, agent=restarted), _TIMEOUT)
    _summary(narrator, result, shop)
    return _verify(narrator, _Outcome(crashed=True, result=result, shop=shop))


async def _crash_when_signalled(task: asyncio.Task[RunResult], crash: asyncio.Event) -> bool:
    """Wait for the refund's crash signal, then kill the run as a dying process would."""
    signalled = asyncio.create_task(crash.wait())
    try:
        await asyncio.wait({task, signalled}, timeout=_TIMEOUT, return_when="FIRST_COMPLETED")
    finally:
        signalled.cancel()
    crashed = crash.is_set()
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return crashed and task.cancelled()


def _summary(narrator: Narrator, result: RunResult, shop: Shop) -> None:
    console = narrator.console
    narrator.section("the run, as stored")
    call_table(result.calls, narrator)
    if result.text:
        console.print(answer_panel(result.text))
    elif result.error is not None:
        console.print(Text(f"run {result.status}: {result.error}", style="bold red"))
    narrator.line("usage", usage_line(result.usage))
    count = shop.executions["A-1001"]
    narrator.line(
        "ledger",
        f"refund body for A-1001 executed {count} time{'s' if count != 1 else ''}; "
        f"emails sent: {len(shop.outbox)}",
    )


def _verify(narrator: Narrator, outcome: _Outcome) -> int:
    sym, console = narrator.sym, narrator.console
    result = outcome.result
    calls = {c.name: c for c in result.calls if c.model_call_id == "m2"} if result else {}
    refund, email = calls.get("refund"), calls.get("send_email")
    checks = [
        ("crash mid-batch", outcome.crashed),
        ("refund ran once", outcome.shop.executions["A-1001"] == 1),
        ("completed", result is not None and result.status == "completed"),
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
    if result is not None and result.observer_errors:
        # The timeline printer is an observer; the run isolates its errors, the demo must not.
        failed.append(f"the timeline printer raised {result.observer_errors} time(s)")
    if failed:
        console.print(
            Text(f"demo failed: {'; '.join(failed)}", style="bold red"),
        )
        return 1
    return 0
