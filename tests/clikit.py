"""A shop app for the CLI tests, written as a module that ``--app`` imports.

``write_app(folder, db)`` writes ``shopapp.py`` into ``folder``: agent ``shipper`` asks to
ship (a person approves it), to quote (the warehouse's result is awaited) and to wrap (a
person answers how), then answers; a later message is noted. Agent ``charger`` charges a card
whose gateway fails, so its call ends ``needs_review`` and the run completes; agent
``broken``'s model fails, so its run fails. ``shopapp:app``
is a function: each command gets a fresh runtime on the SQLite file.
"""

from __future__ import annotations

from pathlib import Path

APP = '''
import steadyrun as sr
from steadyrun.control import Confirm, HostFailure, await_external, require_input
from steadyrun.stores import SqliteStore
from steadyrun.testing import FunctionModel, text, tool_calls

DB = {db!r}


def _confirm(call):
    return Confirm(prompt="Ship it?")


@sr.tool(side_effects=True, policy=_confirm)
def ship(item: str) -> str:
    """Ship an item.

    Args:
        item: What to ship.
    """
    return f"shipped {{item}}"


@sr.tool(side_effects=True)
def quote(item: str) -> str:
    """Ask the warehouse for a price; it answers later.

    Args:
        item: What to price.
    """
    await_external({{"item": item}})


@sr.tool(side_effects=True)
def wrap(item: str, ctx: sr.ToolContext) -> str:
    """Gift-wrap an item the way the customer says.

    Args:
        item: What to wrap.
    """
    if ctx.input_response is None:
        require_input("Which paper?", {{"type": "string"}})
    return f"wrapped {{item}} in {{ctx.input_response}}"


def respond(request):
    last = request.messages[-1]
    users = [m for m in request.messages if m.role == "user"]
    if last.role == "user" and len(users) == 1:
        book = {{"item": "book"}}
        return tool_calls(("ship", book), ("quote", book), ("wrap", book))
    if last.role == "user":
        return text(f"noted: {{last.text}}")
    return text("shipped, quoted and wrapped")


@sr.tool(side_effects=True)
def charge(amount: int) -> str:
    """Charge the card.

    Args:
        amount: Cents.
    """
    raise HostFailure("the gateway timed out")


def charge_once(request):
    if request.messages[-1].role == "user":
        return tool_calls(("charge", {{"amount": 500}}))
    return text("I could not tell whether the card was charged.")


def fail(request):
    raise RuntimeError("the model is down")


shipper = sr.Agent(name="shipper", model=FunctionModel(respond), tools=[ship, quote, wrap])
charger = sr.Agent(name="charger", model=FunctionModel(charge_once), tools=[charge])
broken = sr.Agent(name="broken", model=FunctionModel(fail))


def app():
    return sr.Runtime(SqliteStore(DB), agents=[shipper, charger, broken])
'''


def write_app(folder: Path, db: Path) -> str:
    """Write ``shopapp.py`` into ``folder``; returns the ``--app`` value."""
    (folder / "shopapp.py").write_text(APP.format(db=str(db)))
    return "shopapp:app"
