"""Bad input, property-based: every malformed thing gets a clear typed error; nothing stored
changes.

- Tool-call arguments (``Tool.validate``): any text, invalid UTF-8, huge and deeply nested JSON
  give values or ``ToolArgumentsError``.
- Runs whose model writes malformed JSON, unknown tools, huge or deeply nested arguments: the run
  completes, each bad call is recorded ``failed`` with an error the model sees, no body runs.
- The codec reader (``_codec.decode``): any bytes give a value or ``StoreError``.
- The provider parsers (``fuzz_targets``): any JSON body gives a ``ModelResponse`` or a
  ``ModelError``, apart from the known bugs ``test_known_parser_bugs`` pins down.
- Host writes: schema-invalid answers (``InvalidResponseError``), forged wait ids, call ids and
  run ids (``UnknownCallError``, ``NotPendingError``, ``RunNotFoundError``), wrong kinds of
  answers: each refused with its typed error and the store's snapshot (and feed) unchanged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

import fuzz_targets  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.control import Confirm, await_external, require_input  # noqa: E402
from steadyrun.testing import FunctionModel, ScriptedModel, call, text, tool_calls  # noqa: E402

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


def nested(depth: int, leaf: str = "1") -> str:
    """JSON nested ``depth`` deep, alternating arrays and objects."""
    return (
        "".join('[{"a":' if i % 2 else "[" for i in range(depth))
        + leaf
        + "".join("}]" if i % 2 else "]" for i in reversed(range(depth)))
    )


invalid_utf8 = st.binary(max_size=60).map(lambda b: b.decode("utf-8", "surrogateescape"))
"""Bytes as a str: invalid UTF-8 sequences become lone surrogates (as JSON's ``"\\udc80"`` does)."""

clean_arguments = st.one_of(
    st.text(max_size=60).filter(lambda t: t.isprintable()),  # mostly not JSON at all
    json_values.map(json.dumps),  # JSON, mostly not an object of the right shape
    st.integers(1, 20_000).map(nested),  # deeply nested
    st.integers(10_000, 300_000).map(lambda n: '{"order_id": "' + "x" * n + '"}'),  # huge
    st.integers(1, 50_000).map(lambda n: '{"order_id": "A", "amount_cents": ' + "9" * n + "}"),
    st.just('{"order_id": "A", "amount_cents": 1, "order_id": 2}'),  # duplicate keys
    st.just('{"order_id": "A", "amount_cents": 1e999}'),
)
bad_arguments = clean_arguments | invalid_utf8

# -- tool arguments ------------------------------------------------------------------------


@FAST
@given(bad_arguments)
def test_tool_arguments_give_values_or_a_typed_error(arguments: str) -> None:
    try:
        values = fuzz_targets.refund.validate(arguments)
    except sr.ToolArgumentsError as exc:
        assert exc.tool_name == "refund" and exc.problems
        assert len(str(exc)) < 2_000, "the model's error message must stay short"
    else:
        assert isinstance(values["order_id"], str) and isinstance(values["amount_cents"], int)


# -- runs with bad model output ------------------------------------------------------------


def order_agent(model: sr.ModelClient, ran: list[str]) -> sr.Agent:
    @sr.tool(side_effects=True)
    def refund(order_id: str, amount_cents: int) -> str:
        """Refund.

        Args:
            order_id: The order.
            amount_cents: How much.
        """
        ran.append(order_id)
        return f"refunded {amount_cents}"

    return sr.Agent(name="orders", model=model, tools=[refund])


tool_names = st.just("refund") | st.text(max_size=30).filter(lambda t: t.isprintable())


@SLOW
@given(st.lists(st.tuples(tool_names, clean_arguments), min_size=1, max_size=4))
async def test_bad_tool_calls_are_answered_not_run(calls: list[tuple[str, str]]) -> None:
    parts = [call(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls)]
    model = ScriptedModel([tool_calls(*parts), text("fixed it")])
    ran: list[str] = []
    store = sr.MemoryStore()
    result = await sr.Runtime(store).run(order_agent(model, ran), run_id="r", input="go")
    assert result.status == "completed", result.error
    assert result.text == "fixed it"
    valid = 0
    for (name, args), record in zip(calls, result.calls, strict=True):
        if name == "refund":
            try:
                fuzz_targets.refund.validate(args)
                valid += 1
                assert record.status == "succeeded"
                continue
            except sr.ToolArgumentsError:
                pass
        assert record.status == "failed", (name, args[:80], record.status)
        assert record.error, "the model must be told what was wrong"
    assert len(ran) == valid
    snap = await store.load("r")
    assert snap is not None and len(snap.context) == snap.checkpoint.context_length


@pytest.mark.parametrize(
    "name, arguments", [("\udc80", "{}"), ("refund", '{"order_id": "\udc80"}')]
)
async def test_lone_surrogates_from_the_model(name: str, arguments: str) -> None:
    model = ScriptedModel([tool_calls(call(name, arguments, id="c")), text("fixed it")])
    ran: list[str] = []
    result = await sr.Runtime(sr.MemoryStore()).run(order_agent(model, ran), run_id="r", input="go")
    assert result.status == "completed" and result.calls[0].status == "failed"
    assert ran == []


# -- the codec reader ----------------------------------------------------------------------


@FAST
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_the_codec_reads_a_value_or_raises_store_error(data: bytes) -> None:
    for tp in fuzz_targets.CODEC_TYPES:
        fuzz_targets.codec(bytes([fuzz_targets.CODEC_TYPES.index(tp)]) + data)


@FAST
@given(st.data())
def test_the_codec_refuses_mutated_documents_typed(data: st.DataObject) -> None:
    doc = bytearray(fuzz_targets.seeds("codec")[0][1:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(doc) - 1))
        doc[i] = data.draw(st.integers(0, 255))
    fuzz_targets.codec(bytes([0]) + bytes(doc))


# -- provider parsers ----------------------------------------------------------------------

bodies = st.dictionaries(
    st.sampled_from(["id", "model", "choices", "usage", "output", "status", "error", "content"]),
    json_values,
    max_size=5,
)


@FAST
@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
@given(body=bodies | json_values)
def test_provider_parsers_answer_or_raise_model_error(target: str, body: Any) -> None:
    parse = fuzz_targets.TARGETS[target]
    try:
        parse(json.dumps(body).encode())
    except Exception as exc:
        if not fuzz_targets.known_bug(target, exc):
            raise


KNOWN = [
    ("openai_chat", {"choices": [], "usage": {"completion_tokens": "many"}}),
    ("openai_chat", {"choices": [{"message": "hi"}]}),
    ("openai_responses", {"output": [{"type": "reasoning", "content": ["hi"]}]}),
    ("anthropic", {"type": "message", "content": None}),
]


@pytest.mark.parametrize(
    ("target", "body"), KNOWN, ids=[f"{t}-{i}" for i, (t, _) in enumerate(KNOWN)]
)
def test_malformed_bodies_found_by_fuzzing_give_typed_errors(
    target: str, body: dict[str, Any]
) -> None:
    from steadyrun.models import MalformedResponse
    from steadyrun.models._anthropic_convert import response_from_message
    from steadyrun.models._openai_chat import chat_response
    from steadyrun.models._openai_responses import responses_response

    with pytest.raises(MalformedResponse, match="the response cannot be read"):
        if target == "openai_chat":
            chat_response(body, request_id=None, model="m", provider="openai")
        elif target == "openai_responses":
            responses_response(body, request_id=None, model="m", provider="openai")
        else:
            from anthropic._models import construct_type
            from anthropic.types import Message as AnthropicMessage

            message = construct_type(type_=AnthropicMessage, value=body)
            response_from_message(message, None)  # type: ignore[arg-type]


# -- host writes ---------------------------------------------------------------------------


def waiting_agent(ran: list[str]) -> sr.Agent:
    @sr.tool(side_effects=True, policy=lambda c: Confirm(prompt="ok?"), concurrency_key="")
    def refund(order_id: str, amount_cents: int) -> str:
        """Refund (a person approves).

        Args:
            order_id: The order.
            amount_cents: How much.
        """
        ran.append("refund")
        return "refunded"

    @sr.tool(side_effects=True, concurrency_key="")
    def pay(amount: int, ctx: sr.ToolContext) -> str:
        """Pay with a card the customer names.

        Args:
            amount: How much.
        """
        if ctx.input_response is None:
            require_input("card?", {"type": "string", "pattern": "^card-[0-9]{4}$"}, state=amount)
        ran.append("pay")
        return f"paid with {ctx.input_response}"

    @sr.tool(side_effects=True, concurrency_key="")
    def bank(amount: int) -> str:
        """Wire money; the bank answers later.

        Args:
            amount: How much.
        """
        ran.append("bank")
        await_external({"amount": amount})

    @sr.tool(concurrency_key="")
    def lookup(order_id: str) -> str:
        """Read an order.

        Args:
            order_id: The order.
        """
        return "ok"

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return text("done")
        return tool_calls(
            call("lookup", {"order_id": "A"}, id="k"),
            call("refund", {"order_id": "A", "amount_cents": 5}, id="r"),
            call("pay", {"amount": 3}, id="p"),
            call("bank", {"amount": 9}, id="b"),
        )

    model = FunctionModel(respond)
    return sr.Agent(name="waits", model=model, tools=[lookup, refund, pay, bank])


async def suspended(store: sr.MemoryStore | sr.SqliteStore) -> tuple[sr.Runtime, dict[str, Any]]:
    """A run waiting for a decision, an answer and a result; what a host would know of it."""
    runtime = sr.Runtime(store)
    result = await runtime.run(waiting_agent([]), run_id="r", input="go")
    assert result.status == "suspended"
    items = {i.kind: i for i in await runtime.pending("r")}
    ids = {
        "decision": items["decision"].call_id,
        "input": items["input"].call_id,
        "wait": items["input"].wait_id,
        "result": items["result"].call_id,
        "done": next(c.id for c in result.calls if c.status == "succeeded"),
    }
    return runtime, ids


async def state(store: Any) -> tuple[Any, int]:
    """Everything stored for the run: its snapshot, and its feed."""
    return await store.load("r"), await store.pending("r", 0)


REFUSED = (sr.UsageError,)  # UnknownCallError, NotPendingError, RunNotFoundError, ...


@SLOW
@given(answer=json_values)
async def test_schema_invalid_answers_are_refused_and_change_nothing(answer: Any) -> None:
    store = sr.MemoryStore()
    runtime, ids = await suspended(store)
    before = await state(store)
    valid = isinstance(answer, str) and len(answer) == 9 and answer.startswith("card-")
    valid = valid and answer[5:].isascii() and answer[5:].isdigit()
    if valid:
        await runtime.answer("r", ids["wait"], answer)
        return
    with pytest.raises(sr.InvalidResponseError):
        await runtime.answer("r", ids["wait"], answer)
    assert await state(store) == before


forged = st.one_of(
    st.text(max_size=30),
    st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.sampled_from(["m1.c9", "m2.c1", "m1.c1.w1", "m1.c3.w2", "m1.c3.w", ".w1", "m1.c3.w1x"]),
)


async def forge(runtime: sr.Runtime, ids: dict[str, Any], op: str, run_id: str, fake: str) -> None:
    if op == "decide":
        await runtime.decide(run_id, fake, approve=True)
    elif op == "answer":
        await runtime.answer(run_id, fake, "card-1234")
    elif op == "settle":
        await runtime.settle(run_id, fake, result="forged")
    elif op == "decide-wrong-kind":  # a real call that does not wait for a decision
        await runtime.decide(run_id, ids[fake], approve=False, reason="no")
    elif op == "settle-wrong-kind":
        await runtime.settle(run_id, ids[fake], result="forged")
    elif op == "answer-call-id":  # a call id where a wait id belongs
        await runtime.answer(run_id, ids[fake], "card-1234")


@SLOW
@given(
    op=st.sampled_from(["decide", "answer", "settle"]),
    fake=forged,
    other_run=st.booleans(),
)
async def test_forged_ids_are_refused_and_change_nothing(
    op: str, fake: str, other_run: bool
) -> None:
    store = sr.MemoryStore()
    runtime, ids = await suspended(store)
    if fake in ids.values() or fake == ids["wait"]:
        return
    before = await state(store)
    with pytest.raises(REFUSED):
        await forge(runtime, ids, op, "no-such-run" if other_run else "r", fake)
    assert await state(store) == before


@pytest.mark.parametrize(
    ("op", "which"),
    [
        ("decide-wrong-kind", "input"),
        ("decide-wrong-kind", "result"),
        ("decide-wrong-kind", "done"),
        ("settle-wrong-kind", "decision"),
        ("settle-wrong-kind", "input"),
        ("settle-wrong-kind", "done"),
        ("answer-call-id", "input"),
        ("answer-call-id", "decision"),
    ],
)
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_answers_to_the_wrong_kind_of_call_change_nothing(
    op: str, which: str, kind: str, tmp_path: Path
) -> None:
    store = sr.MemoryStore() if kind == "memory" else sr.SqliteStore(tmp_path / "runs.db")
    try:
        runtime, ids = await suspended(store)
        before = await state(store)
        with pytest.raises(REFUSED):
            await forge(runtime, ids, op, "r", which)
        assert await state(store) == before
        # The real answers still work afterwards, and the run completes.
        await runtime.decide("r", ids["decision"], approve=True)
        await runtime.answer("r", ids["wait"], "card-1234")
        await runtime.settle("r", ids["result"], result="wired")
        ran: list[str] = []
        result = await sr.Runtime(store).resume("r", agent=waiting_agent(ran))  # a new process
        assert result.status == "completed"
        assert sorted(ran) == ["pay", "refund"]
    finally:
        await store.close()
