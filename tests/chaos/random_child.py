"""The random fault-injection child: run the plan of a seed on a store, as worker and host.

Usage: ``python random_child.py --store STORE --seed N --kill-at SPEC --effects FILE
[--race R]`` where STORE is ``sqlite:PATH`` or ``postgres:SCHEMA|DSN`` and SPEC a kill point
of ``randomkit.choose_kill`` (``after:S`` kills come from the fork server, not from here). It
starts the run (or resumes it when the store has it), and whenever the run suspends it does
what the people and systems would (``host_acts``) and resumes, until the run completes. With
``--race`` a second executor on a store connection of its own tries to resume the run at
random moments meanwhile (``racer``); this one waits for the claim while the racer holds it. When
the plan has a background call it also runs a ``TaskManager`` (a worker) alongside the run,
and releases the run's background operations once the run completed with tasks unfinished
(``release_tasks``), resuming it with their notifications. On success it prints one JSON
line: the outcome, and how many events of each kind it counted.

``python random_child.py --serve`` is the fork server (``randomrun.ForkServer``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import pydantic  # noqa: E402
from chaosproc import serve  # noqa: E402
from crash_child import TracedSqliteStore, trace_psycopg  # noqa: E402
from racer import racing, when_free  # noqa: E402
from randomkit import (  # noqa: E402
    BACKGROUND,
    INPUT,
    INPUT_ID,
    RUN_ID,
    KillSwitch,
    approves,
    card_for,
    make_plan,
    read_effects,
    record_effect,
    scripted_model,
    steer_text,
    sub_model,
    task_store_of,
    wire_for,
)

import steadyrun as sr  # noqa: E402
from steadyrun.background import BackgroundTool, Operation, TaskManager, TaskRef  # noqa: E402
from steadyrun.chat import Message, dumps  # noqa: E402
from steadyrun.control import CallView, Confirm, await_external, require_input  # noqa: E402
from steadyrun.extensions import Delegate, SubAgents  # noqa: E402

WRITES = ("save_step", "save_call", "update_call", "append", "claim", "consume")
TASK_WRITES = ("insert", "mark_started", "save_checkpoint", "record", "mark_notified", "release")
LEASE = 0.5  # seconds: a killed worker's task is taken over this long after its last renewal


class SwitchedStore:
    """Forwards to a store; each write method is a ``write`` event before and ``wrote`` after."""

    def __init__(self, inner: Any, switch: KillSwitch) -> None:
        self.inner = inner
        self.switch = switch

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self.switch.hit("write")
            out = await attr(*args, **kwargs)
            self.switch.hit("wrote")
            return out

        return write


class SwitchedTaskStore:
    """Forwards to a task store; each write is a ``bg`` event before and after, a claim that
    got tasks one after; a completion written is logged in the effects file."""

    def __init__(self, inner: Any, switch: KillSwitch, effects: Path) -> None:
        self.inner = inner
        self.switch = switch
        self.effects = effects

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "claim":

            async def claim(*args: Any, **kwargs: Any) -> Any:
                got = await attr(*args, **kwargs)
                if got:
                    self.switch.hit("bg")
                return got

            return claim
        if name not in TASK_WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            self.switch.hit("bg")
            out = await attr(*args, **kwargs)
            if name == "record" and out and args[3].status == "completed":
                record_effect(self.effects, BACKGROUND, args[0], "completed")
            self.switch.hit("bg")
            return out

        return write


class JobArgs(pydantic.BaseModel):
    """The job to crunch."""

    job: str


def go_file(effects: Path, task_id: str) -> Path:
    """The file whose existence releases a background operation (written by the host)."""
    return effects.with_name("go-" + task_id.replace("/", "_"))


class Job(Operation):
    """An external operation: it ends once the host released it (another process may)."""

    def __init__(self, effects: Path, switch: KillSwitch, task_id: str, job: str) -> None:
        self.checkpoint = {"job": job}
        self.go = go_file(effects, task_id)
        self.switch = switch
        self.job = job

    async def wait(self) -> Any:
        await asyncio.sleep(0.02)
        self.switch.hit("bg")  # in the foreground wait, or a worker's attempt
        # The host writes the file, in this process or another: nothing here could be awaited.
        while not self.go.exists():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        return f"crunched {self.job}"


class Crunch(BackgroundTool):
    """A recoverable background tool whose start is idempotent by task id."""

    name = BACKGROUND
    description = "Crunch a job (long: it continues in the background)."
    Args = JobArgs
    foreground_timeout = 0.1
    background_argument = None

    def __init__(self, effects: Path, switch: KillSwitch) -> None:
        self.effects = effects
        self.switch = switch

    async def start(self, task: TaskRef, args: Any) -> Operation:
        # The effects file is the external system's own record: a start it has seen already
        # is an idempotent re-entry, not a second start (one O_APPEND write either way).
        seen = any(e[0] == BACKGROUND and e[1:] == (task.task_id, "start") for e in self._log())
        record_effect(self.effects, BACKGROUND, task.task_id, "reenter" if seen else "start")
        self.switch.hit("bg")
        return Job(self.effects, self.switch, task.task_id, args.job)

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        record_effect(self.effects, BACKGROUND, task.task_id, "recover")
        self.switch.hit("bg")
        return Job(self.effects, self.switch, task.task_id, checkpoint["job"])

    def _log(self) -> list[tuple[str, str, str]]:
        return read_effects(self.effects)


def open_store(spec: str, switch: KillSwitch, *, second: bool = False) -> Any:
    """The store a ``--store`` spec names, its SQL statements wired to ``switch``.

    ``second``: another store on the same database for the racer (psycopg's statements are
    traced process-wide once already).
    """
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return TracedSqliteStore(where, switch)  # type: ignore[arg-type]
    if kind == "postgres":
        from steadyrun.stores._postgres import PostgresStore

        schema, _, dsn = where.partition("|")
        if not second:
            trace_psycopg(switch)  # type: ignore[arg-type]
        return PostgresStore(dsn, schema=schema, min_size=1, max_size=2 if second else 4)
    raise SystemExit(f"unknown store {spec!r}")


def build_agent(
    runtime: sr.Runtime,
    seed: int,
    effects: Path,
    switch: KillSwitch,
    manager: TaskManager | None = None,
) -> sr.Agent:
    """The agent of the plan of ``seed``; every body records its start in ``effects``.

    A sub-agent's bodies record ``<delegation call>/<its call>``: the id its record gets when
    copied under the delegation.
    """

    def started(ctx: sr.ToolContext, phase: str = "run") -> None:
        call_id = ctx.call_id
        if ctx.run_id != RUN_ID:
            call_id = f"{ctx.run_id.removeprefix(RUN_ID + '/')}/{call_id}"
        record_effect(effects, ctx.tool_name, call_id, phase)
        switch.hit("tool")

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order: str, ctx: sr.ToolContext, check: str = "") -> str:
        """Read an order (no side effects).

        Args:
            order: The order.
            check: A call whose effect to check.
        """
        started(ctx)
        return f"order {order} ok" + (f", checked {check}" if check else "")

    @sr.tool(side_effects=True, concurrency_key=lambda a: a["order"])
    async def charge(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Charge an order (side effects, not replayable; one at a time per order).

        Args:
            order: The order.
            cents: The amount.
        """
        started(ctx)
        return f"charged {order} {cents}"

    @sr.tool(side_effects=True)
    async def archive(order: str, ctx: sr.ToolContext) -> str:
        """Archive an order (runs alone; side effects, not replayable).

        Args:
            order: The order.
        """
        started(ctx)
        return f"archived {order}"

    @sr.tool(side_effects=True, replayable=True, concurrency_key="")
    async def notify(order: str, ctx: sr.ToolContext) -> str:
        """Tell the customer (side effects, safe to repeat).

        Args:
            order: The order.
        """
        started(ctx)
        return f"notified {order}"

    def confirm(call: CallView) -> Confirm:
        return Confirm(prompt=f"Refund {call.arguments['cents']} cents?")

    @sr.tool(side_effects=True, policy=confirm, concurrency_key="")
    async def refund(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Refund an order (a person approves first).

        Args:
            order: The order.
            cents: The amount.
        """
        started(ctx)
        return f"refunded {order} {cents}"

    @sr.tool(side_effects=True, concurrency_key="")
    async def bank(amount: int, ctx: sr.ToolContext) -> str:
        """Wire money; the bank answers later.

        Args:
            amount: The amount.
        """
        started(ctx)
        await_external({"amount": amount})

    @sr.tool(side_effects=True, concurrency_key="")
    async def pay(amount: int, ctx: sr.ToolContext) -> str:
        """Pay with a card the customer names.

        Args:
            amount: The amount.
        """
        if ctx.input_response is None:
            started(ctx, "ask")
            require_input("Which card?", {"type": "string", "pattern": "^card-"}, state=amount)
        started(ctx, "run")
        return f"paid {ctx.input_state} with {ctx.input_response}"

    @sr.tool(side_effects=True, replayable=True)
    async def escalate(note: str, ctx: sr.ToolContext) -> str:
        """Forward the customer's next message to the run (runs alone; safe to repeat).

        Args:
            note: The message id.
        """
        started(ctx)
        await runtime.send(ctx.run_id, steer_text(note), id=note)
        return f"escalated {note}"

    plan = make_plan(seed)
    kinds = {c.kind for batch in plan for c in batch}
    extensions = []
    if "subagent" in kinds:
        clerk = Delegate(
            name="clerk",
            description="Hand a list of order tasks to a clerk.",
            tools=[lookup, charge, archive, notify],
            model=sub_model(),
            limits=sr.Limits(max_iterations=30, max_concurrent_tool_calls=3),
        )
        extensions.append(SubAgents([clerk], general=False))
    return sr.Agent(
        name="random",
        model=scripted_model(plan),
        tools=[lookup, charge, archive, notify, refund, bank, pay, escalate]
        + (manager.tools() if manager is not None else []),
        limits=sr.Limits(max_iterations=60, max_concurrent_tool_calls=3),
        extensions=extensions,
    )


async def host_acts(runtime: sr.Runtime, switch: KillSwitch) -> None:
    """What the people and systems do while the run waits (by id, so a retry is harmless)."""
    for item in await runtime.pending(RUN_ID):
        args = json.loads(item.arguments)
        if item.kind == "decision":
            switch.hit("host")
            ok = approves(args["cents"])
            await runtime.decide(
                RUN_ID, item.call_id, approve=ok, reason=None if ok else "over budget"
            )
        elif item.kind == "input":
            switch.hit("host")
            await runtime.answer(RUN_ID, item.wait_id or "", card_for(args["amount"]))
        elif item.kind == "result":
            switch.hit("host")
            await runtime.settle(RUN_ID, item.call_id, result=wire_for(args["amount"]))
    # Sub-agents need nothing from the host (they cannot suspend); background tasks are
    # released once the run rests (``release_tasks``).


async def release_tasks(
    store: Any, manager: TaskManager, switch: KillSwitch, effects: Path
) -> bool:
    """The run completed: release its background operations, wait until every task ended and
    was announced; whether the run has input to resume with."""
    for task in await manager.store.list_tasks(RUN_ID):
        go = go_file(effects, task.id)
        if not task.final and not go.exists():
            switch.hit("host")
            go.write_text("1")
    # The worker in this process announces them (taking a killed worker's over after its lease).
    for _ in range(3000):
        tasks = await manager.store.list_tasks(RUN_ID)
        if all(t.final and t.notified for t in tasks):
            break
        await asyncio.sleep(0.02)
    else:
        raise RuntimeError(f"background tasks never ended: {tasks}")
    return bool(await store.pending(RUN_ID, 0))


async def drive(
    store: Any,
    seed: int,
    switch: KillSwitch,
    effects: Path,
    manager: TaskManager | None,
    race: tuple[Any, int] | None = None,
) -> dict[str, Any]:
    """Start or resume the run, acting as the host whenever it rests, until it completes.

    ``race``: the racer's store and the seed of its moments.
    """
    began = time.monotonic()
    runtime = sr.Runtime(store)
    agent = build_agent(runtime, seed, effects, switch, manager)
    async with contextlib.AsyncExitStack() as stack:
        if race is not None:
            await stack.enter_async_context(racing(race[0], agent, effects, race[1]))
        for _ in range(40):
            # The racer may hold the claim for a moment (or execute the run): wait for it.
            if await store.load(RUN_ID) is None:
                # Killed before the first step: the host retries the start with the same input.
                result = await when_free(
                    lambda w: runtime.run(
                        agent, run_id=RUN_ID, input=INPUT, input_id=INPUT_ID, wait=w
                    )
                )
            else:
                result = await when_free(lambda w: runtime.resume(RUN_ID, agent=agent, wait=w))
            if result.status == "suspended":
                await host_acts(runtime, switch)
                continue
            if result.status != "completed" or manager is None:
                break
            if not await release_tasks(store, manager, switch, effects):
                # The racer may have taken the notifications and finished the run meanwhile:
                # the result in hand is stale, the stored one is the run's.
                result = await when_free(lambda w: runtime.resume(RUN_ID, agent=agent, wait=w))
                break
    if result.status != "completed":
        raise RuntimeError(f"the run ended {result.status}: {result.error}")
    return {
        "status": result.status,
        "text": result.text,
        "calls": [[c.id, c.name, c.status] for c in result.calls],
        "messages": dumps(result.messages, list[Message]).decode(),
        "counts": dict(switch.counts),
        "seconds": time.monotonic() - began,
    }


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--kill-at", default="0")
    parser.add_argument("--effects", required=True)
    parser.add_argument("--race", type=int, default=None)
    args = parser.parse_args(argv)
    switch = KillSwitch(args.kill_at)
    store = open_store(args.store, switch)
    effects = Path(args.effects)
    runs = SwitchedStore(store, switch)
    # The racer's store counts its statements and writes as kill events too: a kill may land
    # while the racer executes the run.
    second = open_store(args.store, switch, second=True) if args.race is not None else None
    race = (SwitchedStore(second, switch), args.race) if second is not None else None
    tasks = manager = None
    if any(c.kind == "background" for batch in make_plan(args.seed) for c in batch):
        # The worker runs alongside the run, as in a service process.
        tasks = task_store_of(args.store)
        manager = TaskManager(
            SwitchedTaskStore(tasks, switch, effects),
            runs,
            [Crunch(effects, switch)],
            lease=LEASE,
            poll=0.05,
        )
    try:
        if manager is None:
            report = await drive(runs, args.seed, switch, effects, None, race)
        else:
            async with manager:
                report = await drive(runs, args.seed, switch, effects, manager, race)
    finally:
        if tasks is not None:
            await tasks.close()
        if second is not None:
            await second.close()
        await store.close()
    print(json.dumps(report))


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve(main)
    else:
        asyncio.run(main(sys.argv[1:]))
