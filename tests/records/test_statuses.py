"""The exported status sets are exactly the statuses the runtime writes, each on its side.

Runs that reach every call status (a crash, people deciding and answering, an awaited result,
a submission, new input cancelling calls, bad calls) are recorded write by write: every status
written is in ``ACTIVE_STATUSES`` or ``SETTLED_STATUSES``, every status of either set is
written, a status the runtime later moved on from is active, and a final one is settled.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.control import CallView, Confirm, Submit, await_external, require_input
from steadyrun.records import ACTIVE_STATUSES, SETTLED_STATUSES, CallRecord, CallUpdate, Step
from steadyrun.testing import ScriptedModel, call, text, tool_calls


class Recording(sr.MemoryStore):
    """A memory store that keeps every status written to each call, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[str, str], list[str]] = defaultdict(list)

    def _note(self, run_id: str, record: CallRecord) -> None:
        statuses = self.seen[(run_id, record.id)]
        if not statuses or statuses[-1] != record.status:
            statuses.append(record.status)

    async def save_step(self, run_id: str, step: Step) -> None:
        await super().save_step(run_id, step)
        for record in step.calls:
            stored = await self.load_call(run_id, record.id)
            if stored is not None:
                self._note(run_id, stored)

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        await super().save_call(run_id, call)
        stored = await self.load_call(run_id, call.id)
        if stored is not None:
            self._note(run_id, stored)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        out = await super().update_call(run_id, call_id, update)
        self._note(run_id, out)
        return out


def confirm_big(view: CallView) -> Confirm | None:
    return Confirm(prompt="ok?") if view.arguments.get("cents", 0) > 100 else None


def submit_orders(view: CallView) -> Submit:
    return Submit(receipt="submitted", payload={})


async def crash_and_resume(store: Recording) -> None:
    """running, then interrupted and needs_review; queued, then succeeded."""
    crashed = asyncio.Event()

    @sr.tool(side_effects=True, concurrency_key="")
    async def charge(cents: int) -> str:
        """Charge."""
        crashed.set()
        await hang()
        return ""

    @sr.tool(side_effects=False, concurrency_key="")
    async def peek() -> str:
        """Read."""
        await hang()
        return ""

    @sr.tool(side_effects=False)
    async def archive() -> str:
        """Runs alone, after the others: still queued at the crash."""
        return "archived"

    def agent(model: ScriptedModel) -> sr.Agent:
        return sr.Agent(name="crash", model=model, tools=[charge, peek, archive])

    batch = tool_calls(("peek", {}), ("charge", {"cents": 1}), ("archive", {}))
    await crash_when(
        sr.Runtime(store).run(agent(ScriptedModel([batch])), run_id="c", input="x"), crashed
    )
    await sr.Runtime(store).resume("c", agent=agent(ScriptedModel([text("checked")])))


async def people_and_hosts(store: Recording) -> None:
    """awaiting_decision, awaiting_input, waiting, rejected, failed, and their settling."""

    @sr.tool(side_effects=True, policy=confirm_big, concurrency_key="")
    async def refund(cents: int) -> str:
        """Refund."""
        return f"refunded {cents}"

    @sr.tool(side_effects=True, concurrency_key="")
    def pay(ctx: sr.ToolContext) -> str:
        """Pay, asking which card."""
        if ctx.input_response is None:
            require_input("Which card?", {"type": "string"})
        return f"paid with {ctx.input_response}"

    @sr.tool(side_effects=True, concurrency_key="")
    async def wire() -> str:
        """Wire; the bank answers later."""
        await_external({"bank": 1})
        return ""

    @sr.tool(side_effects=True, policy=submit_orders, concurrency_key="")
    async def order() -> str:
        """Order; the host's system decides."""
        return ""

    model = ScriptedModel(
        [
            tool_calls(
                ("refund", {"cents": 500}),
                ("refund", {"cents": 900}),
                ("pay", {}),
                ("wire", {}),
                ("order", {}),
                ("nope", {}),
                call("refund", '{"cents": "many"}'),
            ),
            text("done"),
        ]
    )
    agent = sr.Agent(name="people", model=model, tools=[refund, pay, wire, order])
    runtime = sr.Runtime(store, agents=[agent])
    assert (await runtime.run(agent, run_id="p", input="x")).status == "suspended"
    await runtime.decide("p", "m1.c1", approve=True)
    await runtime.decide("p", "m1.c2", approve=False, reason="no")
    (question,) = [i for i in await runtime.pending("p") if i.kind == "input"]
    await runtime.answer("p", question.wait_id, "visa")  # type: ignore[arg-type]
    await runtime.settle("p", "m1.c4", result="wired")
    result = await runtime.resume("p")
    assert result.status == "completed", result
    await runtime.settle("p", "m1.c5", result="ordered")


async def new_input_cancels(store: Recording) -> None:
    """cancelled: calls that had not started when new input arrived."""
    runtime = sr.Runtime(store)

    @sr.tool(side_effects=False)
    async def first(ctx: sr.ToolContext) -> str:
        """Runs alone; input arrives while it runs."""
        await runtime.send(ctx.run_id, "stop that", id="steer")
        return "first"

    @sr.tool(side_effects=False)
    async def second() -> str:
        """Never starts."""
        return "second"

    model = ScriptedModel([tool_calls(("first", {}), ("second", {})), text("ok")])
    agent = sr.Agent(name="steer", model=model, tools=[first, second])
    await runtime.run(agent, run_id="s", input="x")


async def test_the_status_sets_are_the_statuses_the_runtime_writes() -> None:
    store = Recording()
    await crash_and_resume(store)
    await people_and_hosts(store)
    await new_input_cancels(store)
    written = {s for statuses in store.seen.values() for s in statuses}
    assert not ACTIVE_STATUSES & SETTLED_STATUSES
    assert written - (ACTIVE_STATUSES | SETTLED_STATUSES) == set()  # each on a side
    assert written == ACTIVE_STATUSES | SETTLED_STATUSES  # the sets name nothing unwritten
    for (run_id, call_id), statuses in store.seen.items():
        moved_on = statuses[:-1]
        assert set(moved_on) <= ACTIVE_STATUSES, (run_id, call_id, statuses)  # final is final
        assert statuses[-1] in SETTLED_STATUSES, (run_id, call_id, statuses)
        for status in statuses:
            assert sr.records.is_settled(status) == (status in SETTLED_STATUSES)
