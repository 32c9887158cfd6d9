"""Serve an order-support agent whose refunds wait for a person, with the API and web page.

Run it with ``python examples/serve_app.py`` (needs ``pip install -e '.[service]'``), open
http://127.0.0.1:8000/ and enter the token ``dev-token``. Start a run with::

    curl -X POST http://127.0.0.1:8000/runs -H 'Authorization: Bearer dev-token' \
         -H 'Content-Type: application/json' \
         -d '{"run_id": "ticket-1", "agent": "support", "input": "I was charged twice."}'
"""

from __future__ import annotations

import uvicorn

import steadyrun as sr
from steadyrun.control import CallView, Confirm
from steadyrun.service import App, create_app
from steadyrun.testing import FunctionModel, text, tool_calls


def needs_approval(call: CallView) -> Confirm | None:
    cents = call.arguments["amount_cents"]
    return Confirm(prompt=f"Refund ${cents / 100:.2f} on {call.arguments['order_id']}?")


@sr.tool(side_effects=True, policy=needs_approval, concurrency_key=lambda a: a["order_id"])
def refund(order_id: str, amount_cents: int) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents.
    """
    return f"refunded ${amount_cents / 100:.2f} on {order_id}"


def respond(request: sr.ModelRequest) -> sr.ModelResponse:
    """A fake model: refund once per user message, then confirm."""
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    if not any(m.role == "tool" for m in request.messages[last_user:]):
        return tool_calls(("refund", {"order_id": "A-1001", "amount_cents": 4999}))
    return text("Done: I refunded the duplicate charge.")


agent = sr.Agent(name="support", model=FunctionModel(respond), tools=[refund])
app = App(sr.SqliteStore("serve_app.db"), agents=[agent])
api = create_app(app, tokens=["dev-token"])

if __name__ == "__main__":
    uvicorn.run(api, host="127.0.0.1", port=8000)
