"""The app of the console tests: ``steadyrun serve`` and ``steadyrun worker`` load it.

``--app console_app:app``; the store's DSN comes from ``SERVE_DSN``, the ledger from
``SERVE_EFFECTS``, ``ship_replacement``'s sleep from ``SERVE_SLOW``. The ``console`` agent's
fake model is a pure function of the request (whichever process resumes the run asks the
same) and streams its text a word at a time, ``CONSOLE_WORD_DELAY`` seconds apart:

1. ``lookup_order`` (a moment's pause, so the page follows the run before the model writes);
2. a streamed explanation, then four calls at once: two refunds (each needs approval),
   ``ask_customer`` (an input request) and ``bank_check`` (an awaited result);
3. ``ship_replacement`` (side effects, slow: the worker is killed inside it);
4. a streamed summary, which repeats what the person last told the run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

from worker_child import record_effect

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, deltas_of
from steadyrun.control import CallView, Confirm, await_external, require_input
from steadyrun.testing import text, tool_calls

AGENT = "console"
EFFECTS = Path(os.environ.get("SERVE_EFFECTS", "effects.txt"))
EXPLAIN = (
    "I looked at order A-1: the card was charged twice. I will refund the duplicate charge, "
    "refund the late fee on A-2, ask the customer which card to use, and check with the bank "
    "before a replacement ships."
)


def approval(call: CallView) -> Confirm:
    return Confirm(
        prompt=f"Refund {call.arguments['amount_cents']} cents on {call.arguments['order_id']}?"
    )


@sr.tool(side_effects=False)
async def lookup_order(order_id: str) -> dict[str, object]:
    """Look up an order.

    Args:
        order_id: The order.
    """
    await asyncio.sleep(float(os.environ.get("CONSOLE_LOOKUP_PAUSE", "2")))
    return {"id": order_id, "charged_cents": 9998, "status": "delivered"}


@sr.tool(side_effects=True, policy=approval, concurrency_key=lambda a: a["order_id"])
def refund(order_id: str, amount_cents: int) -> str:
    """Refund part of an order.

    Args:
        order_id: The order.
        amount_cents: How much, in cents.
    """
    return f"refunded {amount_cents} cents on {order_id}"


@sr.tool(side_effects=True)
def ask_customer(question: str, ctx: sr.ToolContext) -> str:
    """Ask the customer something.

    Args:
        question: What to ask.
    """
    if ctx.input_response is None:
        require_input(
            question,
            {
                "type": "object",
                "properties": {"card": {"type": "string", "enum": ["visa", "mastercard"]}},
                "required": ["card"],
            },
        )
    return f"the customer chose {ctx.input_response['card']}"


@sr.tool(side_effects=True)
def bank_check(order_id: str) -> str:
    """Ask the bank; its answer comes later, recorded by a person.

    Args:
        order_id: The order.
    """
    raise await_external({"order": order_id, "queue": "bank"})


@sr.tool(side_effects=True)
async def ship_replacement(order_id: str, ctx: sr.ToolContext) -> str:
    """Ship a replacement, slowly.

    Args:
        order_id: The order.
    """
    record_effect(EFFECTS, f"start {ctx.run_id} {ctx.call_id} {os.getpid()}")
    await asyncio.sleep(float(os.environ.get("SERVE_SLOW", "30")))
    record_effect(EFFECTS, f"end {ctx.run_id} {ctx.call_id} {os.getpid()}")
    return f"replacement for {order_id} shipped"


def respond(request: ModelRequest) -> ModelResponse:
    """The next response, from the request alone."""
    batches = sum(1 for m in request.messages if m.role == "tool")
    if batches == 0:
        return tool_calls(("lookup_order", {"order_id": "A-1"}))
    if batches == 1:
        return tool_calls(
            ("refund", {"order_id": "A-1", "amount_cents": 4999}),
            ("refund", {"order_id": "A-2", "amount_cents": 1500}),
            ("ask_customer", {"question": "Which card should the refund go to?"}),
            ("bank_check", {"order_id": "A-1"}),
            content=EXPLAIN,
        )
    if batches == 2:
        return tool_calls(("ship_replacement", {"order_id": "A-1"}))
    users = [m.text for m in request.messages if m.role == "user"]
    said = f" You asked: “{users[-1]}” — noted." if len(users) > 1 else ""
    return text(
        "All done: the duplicate charge is refunded, the bank confirmed, and the replacement "
        f"shipment is marked for review because it was cut off.{said}"
    )


class ConsoleModel:
    """A fake streaming model (tests only): ``respond``'s answers, text a word at a time."""

    def __init__(self, delay: float | None = None) -> None:
        self.delay = delay

    async def respond(self, request: ModelRequest) -> ModelResponse:
        return respond(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        delay = self.delay
        if delay is None:
            delay = float(os.environ.get("CONSOLE_WORD_DELAY", "0.08"))
        for delta in deltas_of(respond(request)):
            if delta.part != "text":
                yield delta
                continue
            words = delta.text.split(" ")
            for i, word in enumerate(words):
                piece = word if i == len(words) - 1 else word + " "
                yield ResponseDelta(part="text", index=delta.index, text=piece)
                await asyncio.sleep(delay)


def console_agent() -> sr.Agent:
    """The ``console`` agent."""
    return sr.Agent(
        name=AGENT,
        model=ConsoleModel(),
        tools=[lookup_order, refund, ask_customer, bank_check, ship_replacement],
    )


def _app() -> object:
    from steadyrun.service import App
    from steadyrun.stores import PostgresStore

    store = PostgresStore(os.environ.get("SERVE_DSN", "dbname=steadyrun"), max_size=6)
    return App(store, agents=[console_agent()], poll=0.5)


app = _app() if "SERVE_DSN" in os.environ else None
