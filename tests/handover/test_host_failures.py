"""Unknown outcomes: HostFailure, timeouts, cancellations; strict settlement holds the run."""

from __future__ import annotations

import asyncio

import pytest

import steadyrun as sr
from steadyrun.control import HostFailure
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls


def agent(model: ScriptedModel, **kw: object) -> sr.Agent:
    @sr.tool(side_effects=True)
    def wire(amount: int) -> str:
        """Wire money; the bank's gateway may fail without saying whether it sent it."""
        raise HostFailure("the bank gateway dropped the connection")

    @sr.tool(replayable=True, side_effects=True)
    def notify(to: str) -> str:
        """Notify (safe to repeat)."""
        raise HostFailure("mail relay timed out")

    @sr.tool(side_effects=True, timeout=0.05)
    async def slow_charge(amount: int) -> str:
        """A charge that never answers."""
        await asyncio.Event().wait()
        return "never"

    @sr.tool(side_effects=False)
    async def lookup(order_id: str) -> str:
        """A read that gets cancelled by its own client library."""
        raise asyncio.CancelledError

    return sr.Agent(
        name="ops",
        model=model,
        tools=[wire, notify, slow_charge, lookup],
        **kw,  # type: ignore[arg-type]
    )


async def test_unknown_outcomes_are_settled_by_traits(store: Store) -> None:
    model = ScriptedModel(
        [
            tool_calls(
                ("wire", {"amount": 5}),
                ("notify", {"to": "a@b"}),
                ("slow_charge", {"amount": 5}),
                ("lookup", {"order_id": "1"}),
            ),
            text("Checked."),
        ]
    )
    result = await sr.Runtime(store).run(agent(model), run_id="r", input="x")
    assert result.status == "completed"
    statuses = {c.name: c.status for c in result.calls}
    assert statuses == {
        "wire": "needs_review",
        "notify": "interrupted",
        "slow_charge": "needs_review",
        "lookup": "interrupted",
    }
    assert "gateway dropped" in (result.call("m1.c1").result or "")
    assert "within 0.05 s" in (result.call("m1.c3").result or "")
    parts = model.requests[1].messages[-1].parts
    assert all(p.is_error for p in parts)  # type: ignore[union-attr]
    assert "may or may not have taken effect" in parts[0].content  # type: ignore[union-attr]


async def test_strict_settlement_holds_the_run_until_the_host_settles(store: Store) -> None:
    model = ScriptedModel([tool_calls(("wire", {"amount": 5})), text("The wire went out.")])
    runtime = sr.Runtime(store)
    first = await runtime.run(agent(model, strict_settlement=True), run_id="r", input="x")
    assert first.status == "suspended"
    (item,) = await runtime.pending("r")
    assert (item.kind, item.blocking, item.call_id) == ("review", True, "m1.c1")
    assert (await runtime.resume("r")).status == "suspended"
    assert len(model.requests) == 1
    await runtime.settle("r", "m1.c1", result="the bank confirms wire #77 was sent")
    done = await runtime.resume("r")
    assert done.status == "completed"
    part = model.requests[1].messages[-1].parts[0]
    assert not part.is_error and part.content == "the bank confirms wire #77 was sent"  # type: ignore[union-attr]


async def test_without_strict_settlement_review_items_are_listed_but_do_not_block(
    store: Store,
) -> None:
    model = ScriptedModel([tool_calls(("wire", {"amount": 5})), text("Please check.")])
    runtime = sr.Runtime(store)
    result = await runtime.run(agent(model), run_id="r", input="x")
    assert result.status == "completed"
    (item,) = await runtime.pending("r")
    assert (item.kind, item.blocking) == ("review", False)
    await runtime.settle("r", "m1.c1", error="the wire was not sent")
    assert await runtime.pending("r") == []
    await runtime.settle("r", "m1.c1", error="the wire was not sent")  # the same: no change
    with pytest.raises(sr.ConflictError, match="final"):  # the first outcome recorded stays
        await runtime.settle("r", "m1.c1", result="twice")
