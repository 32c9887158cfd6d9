"""What a tool hands back never crashes a run.

Text no store can encode (a lone surrogate) is scrubbed as model output is; a value with no JSON
form is a model-visible error. On memory and SQLite (a real file).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.control import HostFailure, await_external, detach
from steadyrun.stores import Store
from steadyrun.testing import ScriptedModel, text, tool_calls

BAD = "abc\udc80def"
CLEAN = "abc\ufffddef"
EN = sr.Texts()


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store = (
        sr.MemoryStore() if request.param == "memory" else sr.SqliteStore(tmp_path / "runs.db")
    )
    try:
        yield made
    finally:
        await made.close()


def last_results(model: ScriptedModel) -> list[ToolResultPart]:
    last = [m for m in model.requests[-1].messages if m.role == "tool"][-1]
    return [p for p in last.parts if isinstance(p, ToolResultPart)]


# -- text no store can encode --------------------------------------------------------------


@sr.tool(concurrency_key="")
def garbled() -> str:
    """Returns text with a lone surrogate."""
    return BAD


@sr.tool(concurrency_key="")
def garbled_error() -> str:
    """Raises with a lone surrogate in its message."""
    raise ValueError(BAD)


@sr.tool(concurrency_key="", side_effects=True)
def garbled_host() -> str:
    """The host fails with a lone surrogate in its message."""
    raise HostFailure(BAD)


@sr.tool(concurrency_key="")
def garbled_receipt() -> str:
    """Detaches with a lone surrogate in its receipt."""
    detach(BAD)


@sr.tool(concurrency_key="")
def garbled_payload() -> str:
    """Awaits a result with a lone surrogate in its payload."""
    await_external({"note": BAD})


GARBLED = [garbled, garbled_error, garbled_host, garbled_receipt, garbled_payload]


async def test_a_result_with_a_lone_surrogate_is_scrubbed_instead_of_crashing(
    store: Store,
) -> None:
    model = ScriptedModel([tool_calls(("garbled", {}), ("garbled_error", {})), text("ok")])
    agent = sr.Agent(name="a", model=model, tools=GARBLED)
    result = await sr.Runtime(store).run(agent, run_id="r", input="x")
    assert result.status == "completed", result.error
    assert result.call("m1.c1").result == CLEAN
    assert CLEAN in (result.call("m1.c2").error or "")
    seen = [p.content for p in last_results(model)]
    assert seen[0] == CLEAN and CLEAN in seen[1]
    snap = await store.load("r")
    assert snap is not None and snap.run.status == "completed"
    assert [c.result for c in snap.calls][0] == CLEAN


async def test_host_failures_receipts_and_payloads_with_lone_surrogates_never_crash(
    store: Store,
) -> None:
    model = ScriptedModel(
        [
            tool_calls(("garbled_host", {}), ("garbled_receipt", {}), ("garbled_payload", {})),
            text("ok"),
        ]
    )
    agent = sr.Agent(name="a", model=model, tools=GARBLED)
    result = await sr.Runtime(store).run(agent, run_id="r", input="x")
    assert result.status == "completed", result.error
    host, receipt, payload = (result.call(f"m1.c{i}") for i in (1, 2, 3))
    assert host.status == "needs_review" and CLEAN in (host.result or "")
    assert receipt.handover == "detached" and receipt.result == CLEAN
    # A payload is the host's data: it is not rewritten, the call fails and the model is told.
    assert payload.status == "failed" and payload.payload is None
    assert "cannot be stored" in (payload.error or "")
    assert last_results(model)[2].is_error


# -- values with no JSON form --------------------------------------------------------------


class Opaque:
    def __str__(self) -> str:
        return "<Opaque>"


@sr.tool(concurrency_key="")
def opaque() -> object:
    """Returns an object with no JSON form."""
    return Opaque()


@sr.tool(concurrency_key="")
def numbers() -> object:
    """Returns a set and a tuple."""
    return {"set": {3}, "pair": (1, 2)}


async def test_a_value_with_no_json_form_is_an_error_the_model_sees(store: Store) -> None:
    model = ScriptedModel([tool_calls(("opaque", {}), ("numbers", {})), text("ok")])
    agent = sr.Agent(name="a", model=model, tools=[opaque, numbers])
    result = await sr.Runtime(store).run(agent, run_id="r", input="x")
    assert result.status == "completed", result.error
    call = result.call("m1.c1")
    assert call.status == "failed" and call.result is None
    assert call.error == EN.result_not_json.format(name="opaque", kind="Opaque")
    first, second = last_results(model)
    assert first.is_error and "<Opaque>" not in first.content
    # The documented conversion: sets and tuples are JSON arrays.
    assert not second.is_error and second.content == '{"set": [3], "pair": [1, 2]}'
