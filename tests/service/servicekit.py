"""An order-support agent whose refunds wait for a person, served by an App."""

from __future__ import annotations

from typing import Any

import steadyrun as sr
from steadyrun.control import CallView, Confirm, require_input
from steadyrun.service import App
from steadyrun.stores import Store
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def approval(call: CallView) -> Confirm:
    return Confirm(
        prompt=f"Refund {call.arguments['amount_cents']} cents on {call.arguments['order_id']}?"
    )


@sr.tool(side_effects=True, policy=approval, concurrency_key=lambda a: a["order_id"])
def refund(order_id: str, amount_cents: int) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents.
    """
    return f"refunded {amount_cents} cents on {order_id}"


@sr.tool(concurrency_key="")
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return {"id": order_id, "status": "delivered", "charged_cents": 9998}


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
                "properties": {
                    "card": {"type": "string", "enum": ["visa", "mastercard"]},
                    "amount_cents": {"type": "integer", "minimum": 1},
                    "urgent": {"type": "boolean"},
                },
                "required": ["card", "amount_cents"],
            },
        )
    return f"customer answered {ctx.input_response}"


def support_model() -> FunctionModel:
    """Looks up, refunds (needs approval), then thanks; any number of runs."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
        since = sum(1 for m in request.messages[last_user:] if m.role == "tool")
        if since == 0:
            return tool_calls(("lookup_order", {"order_id": "A-1001"}))
        if since == 1:
            return tool_calls(("refund", {"order_id": "A-1001", "amount_cents": 4999}))
        return text("You were charged twice; I refunded the duplicate charge of $49.99.")

    return FunctionModel(respond)


def support_agent() -> sr.Agent:
    return sr.Agent(name="support", model=support_model(), tools=[lookup_order, refund])


def asking_agent() -> sr.Agent:
    model = ScriptedModel(
        [
            tool_calls(("ask_customer", {"question": "Which card should we refund to?"})),
            text("Thanks!"),
        ]
    )
    return sr.Agent(name="asker", model=model, tools=[ask_customer])


def make_app(store: Store) -> App:
    return App(store, agents=[support_agent(), asking_agent()])
