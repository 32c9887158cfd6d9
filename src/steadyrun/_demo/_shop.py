"""The demo's world: a small shop with a bank ledger, its three tools, and the model's script.

The shop stands for the outside world: its ledger is a JSON-lines file that every process of the
demo appends to (flushed and fsynced) and reads, so it outlives the killed worker and proves how
many times each side effect really happened.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from steadyrun.chat import ModelRequest, ModelResponse, ToolResultPart
from steadyrun.testing import ScriptedModel, call, text, tool_calls
from steadyrun.tools import Tool, tool

__all__ = [
    "AGENT",
    "CUSTOMER",
    "CUSTOMER_EMAIL",
    "INSTRUCTIONS",
    "RUN_ID",
    "Shop",
    "after_restart_script",
    "before_crash_script",
    "make_tools",
]

RUN_ID = "ticket-4711"
AGENT = "order-support"
CUSTOMER_EMAIL = "dana@example.com"
CUSTOMER = (
    "Hi, I was charged twice for order A-1001! Can you fix that? "
    "And where is my other order, A-1002?"
)
INSTRUCTIONS = (
    "You are the support agent of an online shop. Look orders up before acting on them, "
    "refund duplicate charges, and confirm refunds to the customer by email."
)
_LATENCY = 0.05  # seconds a tool takes, so concurrent lookups visibly overlap


class Shop:
    """Orders, the bank's refund ledger and the outbox, kept in a JSON-lines ledger file.

    Every refund and every email is one line, written and fsynced before the tool goes on, so
    the file holds exactly the side effects that happened, whichever process made them.

    Args:
        ledger: The ledger file; created on the first write.
        notify: Called with a line of text whenever money moves or an email leaves.
    """

    def __init__(self, ledger: Path, notify: Callable[[str], None] = lambda line: None) -> None:
        self.ledger = ledger
        self.notify = notify

    # -- the ledger file -------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """Every line of the ledger, in order (none when the file does not exist yet)."""
        try:
            lines = self.ledger.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def refunds(self, order_id: str | None = None) -> list[dict[str, Any]]:
        """The refunds the bank executed, in order; only those of ``order_id`` when given."""
        return [
            e for e in self.entries() if e["kind"] == "refund" and order_id in (None, e["order_id"])
        ]

    def outbox(self) -> list[dict[str, Any]]:
        """The emails sent."""
        return [e for e in self.entries() if e["kind"] == "email"]

    def _append(self, entry: dict[str, Any]) -> None:
        with self.ledger.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    # -- the shop --------------------------------------------------------------------------

    def order(self, order_id: str) -> dict[str, Any]:
        """An order as the shop's database shows it, refunds included."""
        if order_id == "A-1001":
            return {
                "order_id": "A-1001",
                "status": "delivered",
                "total_cents": 4999,
                "charges": [
                    {"charge_id": "ch_81", "amount_cents": 4999},
                    {"charge_id": "ch_82", "amount_cents": 4999},
                ],
                "refunds": [_public(r) for r in self.refunds(order_id)],
            }
        if order_id == "A-1002":
            return {
                "order_id": "A-1002",
                "status": "shipped",
                "carrier": "DHL",
                "expected_delivery": "in 2 days",
                "refunds": [],
            }
        raise LookupError(f"there is no order {order_id!r}")

    def refund(self, order_id: str, amount_cents: int, reason: str) -> dict[str, Any]:
        """Move money back to the customer (the side effect the demo protects)."""
        entry = {
            "kind": "refund",
            "refund_id": f"re_{len(self.refunds()) + 1}",
            "order_id": order_id,
            "amount_cents": amount_cents,
            "reason": reason,
            "pid": os.getpid(),
        }
        self._append(entry)
        self.notify(
            f"bank: refunded {money(amount_cents)} on {order_id}, {entry['refund_id']} fsynced "
            f"to the ledger file (refunds on {order_id}: {len(self.refunds(order_id))})"
        )
        return _public(entry)

    def send(self, to: str, subject: str, body: str) -> None:
        """Send an email."""
        self._append(
            {"kind": "email", "to": to, "subject": subject, "body": body, "pid": os.getpid()}
        )
        self.notify(f"mail: sent {subject!r} to {to}")


def _public(entry: dict[str, Any]) -> dict[str, Any]:
    """A ledger entry as the bank shows it (without the demo's bookkeeping)."""
    return {k: v for k, v in entry.items() if k not in ("kind", "pid")}


def money(cents: int) -> str:
    """``4999`` as ``$49.99``."""
    return f"${cents // 100}.{cents % 100:02d}"


def make_tools(shop: Shop, crash: Callable[[], Awaitable[None]] | None = None) -> list[Tool]:
    """The agent's tools over ``shop``.

    With ``crash`` given, the refund body awaits it right after the money moved and before its
    result can be recorded: the demo's worker signals its parent there and waits to be killed.
    """

    @tool(replayable=True, side_effects=False, concurrency_key="")
    async def lookup_order(order_id: str) -> dict[str, Any]:
        """Look an order up: its status, charges and refunds.

        Args:
            order_id: The order id, like A-1001.
        """
        await asyncio.sleep(_LATENCY)
        return shop.order(order_id)

    @tool(side_effects=True, concurrency_key=lambda args: args["order_id"])
    async def refund(order_id: str, amount_cents: int, reason: str) -> dict[str, Any]:
        """Refund money on an order.

        Args:
            order_id: The order to refund.
            amount_cents: How much, in cents.
            reason: Why, for the bank statement.
        """
        await asyncio.sleep(_LATENCY)
        entry = shop.refund(order_id, amount_cents, reason)
        if crash is not None:
            await crash()  # the money moved; the process dies before the result is saved
        return entry

    @tool(side_effects=True)
    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email to the customer.

        Args:
            to: The address.
            subject: The subject line.
            body: The text.
        """
        await asyncio.sleep(_LATENCY)
        shop.send(to, subject, body)
        return f"email to {to} sent"

    return [lookup_order, refund, send_email]


def before_crash_script() -> ScriptedModel:
    """What the model answers in the first process: look up, then refund and email at once."""
    return ScriptedModel(
        [
            tool_calls(
                call("lookup_order", {"order_id": "A-1001"}),
                call("lookup_order", {"order_id": "A-1002"}),
                content="Let me look up both orders.",
            ),
            tool_calls(
                call(
                    "refund",
                    {"order_id": "A-1001", "amount_cents": 4999, "reason": "duplicate charge"},
                ),
                call(
                    "send_email",
                    {
                        "to": CUSTOMER_EMAIL,
                        "subject": "Your refund for order A-1001",
                        "body": "Hi Dana, we are refunding the duplicate charge of $49.99 on "
                        "order A-1001. It shows on your statement within 3-5 business days.",
                    },
                ),
                content="A-1001 was charged twice. I'll refund one charge and email you.",
            ),
        ],
        name="scripted model (process 1)",
    )


def after_restart_script() -> ScriptedModel:
    """What the model answers after the restart: it reads the tool results it is given.

    A refund reported as unknown is checked with a lookup before anything else; the answer
    then depends on what the lookup found.
    """

    def check_refund(request: ModelRequest) -> ModelResponse:
        results = _last_results(request)
        refund = results.get("refund")
        if refund is not None and refund.is_error:
            return tool_calls(
                call("lookup_order", {"order_id": "A-1001"}),
                content="The refund's outcome is unknown; I'll check the order before retrying.",
            )
        return text("Your duplicate charge on A-1001 has been refunded.")

    def answer(request: ModelRequest) -> ModelResponse:
        lookup = _last_results(request).get("lookup_order")
        order = json.loads(lookup.content) if lookup is not None and not lookup.is_error else {}
        refunds = order.get("refunds", [])
        if refunds:
            r = refunds[0]
            return text(
                f"Sorry about that! You were charged {money(4999)} twice for A-1001; I refunded "
                f"the duplicate charge ({r['refund_id']}, {money(r['amount_cents'])}) and emailed "
                "you a confirmation. A-1002 has shipped with DHL and should arrive in 2 days."
            )
        return tool_calls(
            call("refund", {"order_id": "A-1001", "amount_cents": 4999, "reason": "duplicate"})
        )

    return ScriptedModel([check_refund, answer], name="scripted model (process 2)")


def _last_results(request: ModelRequest) -> dict[str, ToolResultPart]:
    """The tool results of the request's last message, by tool name."""
    if not request.messages:
        return {}
    parts = request.messages[-1].parts
    return {p.name: p for p in parts if isinstance(p, ToolResultPart)}
