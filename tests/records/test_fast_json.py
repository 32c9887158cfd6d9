"""The codec's quick writer (msgspec) writes what pydantic writes, byte for byte, or stands aside.

Values of every stored dataclass are built from the types their fields declare (``Any`` gets
plain JSON data and what is not: bytes, floats, tuples, datetimes, objects only pydantic
knows), and ``encode`` must give exactly pydantic's document or the same ``StoreError``.
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

from steadyrun import _codec
from steadyrun._errors import StoreError
from steadyrun._fast_json import writer
from steadyrun.background._model import Task, Update
from steadyrun.chat import Message, TextPart, ToolCallPart
from steadyrun.records import Block, CallRecord, Checkpoint
from steadyrun.records._history import StepCall, StepEntry
from steadyrun.records._step import RunRecord
from steadyrun.stores import FeedMessage, _call_rows, _history
from steadyrun.stream import DisplaySnapshot

STORED = [RunRecord, Checkpoint, Block, CallRecord, Message, FeedMessage, Task, Update]
ZONES = [
    None,
    datetime.UTC,
    datetime.timezone(datetime.timedelta(hours=2)),
    datetime.timezone(datetime.timedelta(hours=-5, minutes=-30)),
]


class Model(BaseModel):
    """Only pydantic knows how to write it."""

    x: int = 1


TEXT = st.text(st.characters(codec=None, categories=None), max_size=12)  # lone surrogates too
DATES = st.builds(
    lambda d, tz: d.replace(tzinfo=tz),
    st.datetimes(),
    st.sampled_from(ZONES),
)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | TEXT
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.binary(max_size=6)
    | DATES
    | st.just(Model())
    | st.just(pathlib.PurePosixPath("/a/b"))
)
ANY = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(TEXT, inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.integers(0, 9), inner, max_size=2)
    ),
    max_leaves=6,
)


def values(hint: Any) -> st.SearchStrategy[Any]:
    """Values of ``hint``, as a store gets them (and, under ``Any``, anything)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any or hint is object:
        return ANY
    if origin is typing.Annotated:
        return values(args[0])
    if hint is str:
        return TEXT
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(min_value=-(2**70), max_value=2**70)
    if hint is float:
        return st.floats(allow_nan=True)
    if hint is type(None):
        return st.none()
    if hint is datetime.datetime:
        return DATES
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(values(args[0]), max_size=2)
    if origin is tuple:
        return st.lists(values(args[0]), max_size=2).map(tuple)
    if origin is dict:
        return st.dictionaries(values(args[0]), values(args[1]), max_size=2)
    if origin is typing.Union or origin is types.UnionType:
        return st.one_of([values(a) for a in args])
    if dataclasses.is_dataclass(hint):
        return instances(hint)
    raise AssertionError(f"no strategy for {hint!r}")


def instances(cls: Any) -> st.SearchStrategy[Any]:
    """Instances of ``cls``, each field often at its default (``exclude_defaults`` drops it)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        of = values(hints[f.name])
        if f.default is not dataclasses.MISSING:
            of = st.just(f.default) | of
        elif f.default_factory is not dataclasses.MISSING:
            of = st.builds(f.default_factory) | of
        fields[f.name] = of
    return st.builds(cls, **fields)


def pydantic_document(obj: Any, tp: Any) -> bytes | None:
    """What the codec wrote before it had a quick writer; ``None`` where pydantic refuses."""
    try:
        data = TypeAdapter(tp).serializer.to_json(obj)
    except PydanticSerializationError:
        return None
    return b'{"format":1,"data":' + data + b"}"


def same_as_pydantic(obj: Any) -> None:
    expected = pydantic_document(obj, type(obj))
    if expected is None:
        with pytest.raises(StoreError):
            _codec.encode(obj)
    else:
        assert _codec.encode(obj) == expected


@pytest.mark.parametrize("tp", STORED + [DisplaySnapshot], ids=lambda tp: tp.__name__)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_stored_type_is_written_as_pydantic_writes_it(tp: Any, data: st.DataObject) -> None:
    same_as_pydantic(data.draw(instances(tp)))


def _now() -> datetime.datetime:
    return datetime.datetime(2026, 12, 7, 7, 0, 0, 123456, tzinfo=datetime.UTC)


def _call(**changes: Any) -> CallRecord:
    call = CallRecord(
        id="m1.c1",
        model_call_id="m1",
        provider_call_id="call_0",
        name="echo",
        arguments='{"text": "hi"}',
        rev=2,
        status="running",
        started_at=_now(),
    )
    return dataclasses.replace(call, **changes)


def _loop_records() -> list[Any]:
    return [
        RunRecord(run_id="r", agent="loop", created_at=_now(), updated_at=_now()),
        Checkpoint(extra={"steadyrun.finish_reason": "tool_calls"}, seen_inputs=["r:input@1"]),
        Block(id="m1.b1", kind="tool_call", position=1, call_id="m1.c1", at=_now()),
        _call(payload={"plain": ["json", 1, True, None]}),
        Message(
            role="assistant",
            parts=[TextPart(text="x"), ToolCallPart(call_id="c", name="echo", arguments="{}")],
        ),
    ]


def test_the_loops_records_do_not_go_through_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a loop's step writes (plain data under ``Any``) is msgspec's to write."""
    expected = [pydantic_document(r, type(r)) for r in _loop_records()]

    def no_pydantic(tp: Any) -> Any:
        raise AssertionError(f"pydantic asked to write {tp!r}")

    monkeypatch.setattr(_codec, "_writers", {})
    monkeypatch.setattr(_codec, "_adapter", no_pydantic)
    assert [_codec.encode(r) for r in _loop_records()] == expected


@pytest.mark.parametrize(
    ("payload", "written"),
    [
        (b"abc", b'"payload":"abc"'),  # pydantic: UTF-8 text; msgspec would write base64
        (1e16, b'"payload":1e+16'),  # msgspec would write 1e16
        ((1, "a"), b'"payload":[1,"a"]'),
        (Model(), b'"payload":{"x":1}'),  # msgspec does not know it
        ({1: "a"}, b'"payload":{"1":"a"}'),
    ],
)
def test_values_pydantic_writes_otherwise_are_left_to_it(payload: Any, written: bytes) -> None:
    doc = _codec.encode(_call(payload=payload))
    assert written in doc
    assert doc == pydantic_document(_call(payload=payload), CallRecord)


def test_what_neither_can_write_is_refused_as_before() -> None:
    with pytest.raises(StoreError, match="cannot store CallRecord"):
        _codec.encode(_call(payload=object()))
    with pytest.raises(StoreError, match="cannot store CallRecord"):
        _codec.encode(_call(payload=b"\xff"))  # not UTF-8: pydantic refuses, as it did


def test_a_subclass_is_written_by_its_declared_fields() -> None:
    @dataclasses.dataclass(kw_only=True, slots=True)
    class Wider(Block):
        secret: str = "not stored"

    wider = Wider(id="b", kind="content", position=0, at=_now())
    assert b"secret" not in _codec.encode(wider, Block)
    assert _codec.encode(wider, Block) == pydantic_document(wider, Block)


def test_a_union_member_of_another_class_is_left_to_pydantic() -> None:
    @dataclasses.dataclass(kw_only=True, slots=True)
    class LoudText(TextPart):
        volume: int = 11

    message = Message(role="user", parts=[LoudText(text="hi")])
    assert _codec.encode(message) == pydantic_document(message, Message)
    assert b"volume" not in _codec.encode(message)


@dataclasses.dataclass
class _Bytes:
    data: bytes


@dataclasses.dataclass
class _Float:
    ratio: float


@dataclasses.dataclass
class _IntKeys:
    by_number: dict[int, str]


@dataclasses.dataclass
class _Pair:
    pair: tuple[int, str]


@dataclasses.dataclass
class _Node:
    children: list[_Node]


@pytest.mark.parametrize("tp", [_Bytes, _Float, _IntKeys, _Pair, _Node], ids=lambda t: t.__name__)
def test_a_type_declaring_what_msgspec_may_write_otherwise_is_pydantics(tp: Any) -> None:
    assert writer(tp) is None
    assert writer(dict[str, Any]) is None  # not a dataclass


def test_a_type_of_plain_declarations_has_a_writer() -> None:
    quick = writer(Block)
    assert quick is not None
    block = Block(id="b", kind="content", position=0, at=_now())
    assert b'{"format":1,"data":' + (quick(block) or b"") + b"}" == pydantic_document(block, Block)


@pytest.mark.parametrize("tp", STORED + [StepEntry], ids=lambda tp: tp.__name__)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_without_defaults_each_type_is_written_as_pydantic_writes_it(
    tp: Any, data: st.DataObject
) -> None:
    obj = data.draw(instances(tp))
    exclude = frozenset({"checkpoint"}) if tp is StepEntry else frozenset()
    quick = writer(tp, omit_defaults=True, exclude=exclude)
    assert quick is not None
    written = quick(obj)
    if written is not None:  # None: left to pydantic
        expected = TypeAdapter(tp).serializer.to_json(
            obj, exclude_defaults=True, exclude=set(exclude) or None
        )
        assert written == expected


def test_a_steps_entry_and_call_row_do_not_go_through_pydantic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The history entry and the SQL stores' call row of a loop's step: msgspec's to write."""
    entry = StepEntry(
        step=7,
        at=_now(),
        status="running",
        start=6,
        calls=[StepCall(id="m3.c1", status="running")],
        checkpoint=Checkpoint(phase="batch", batch=["m3.c1"], extra={"a": "b"}),
    )
    call = _call(payload={"plain": [1, "two"]})
    expected = (_history.encode_entry(entry), _call_rows.encode_row(call, _call_rows.NO_SPOTS))

    class NoPydantic:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"pydantic asked for {name}")

    monkeypatch.setattr(_history, "_ENTRY", NoPydantic())
    monkeypatch.setattr(_history, "_CHECKPOINT", NoPydantic())
    monkeypatch.setattr(_call_rows, "_adapter", lambda tp: NoPydantic())
    assert _history.encode_entry(entry) == expected[0]
    assert _call_rows.encode_row(call, _call_rows.NO_SPOTS) == expected[1]


@dataclasses.dataclass
class _Counts:
    n: int = 0


@dataclasses.dataclass
class _Holder:
    counts: _Counts = dataclasses.field(default_factory=_Counts)
    maybe: _Counts | None = dataclasses.field(default_factory=_Counts)
    seeded: _Counts = dataclasses.field(default_factory=lambda: _Counts(n=1))


@pytest.mark.parametrize(
    "holder",
    [
        _Holder(),
        _Holder(counts=_Counts(n=2), maybe=None, seeded=_Counts()),
        _Holder(maybe=_Counts(n=3), seeded=_Counts(n=1)),
    ],
)
def test_a_nested_dataclass_at_its_default_is_left_out_as_pydantic_does(holder: _Holder) -> None:
    quick = writer(_Holder, omit_defaults=True)
    assert quick is not None
    expected = TypeAdapter(_Holder).serializer.to_json(holder, exclude_defaults=True)
    assert quick(holder) == expected
