"""The codec's quick writer: msgspec writes a stored dataclass where its bytes are pydantic's.

Encoding was a third of what an iteration of the loop cost on a ``MemoryStore`` (issue 20):
each step writes its run record, checkpoint, messages, blocks and call records, and
pydantic-core took 1-3.5 us for each of these small documents where msgspec takes 0.5-1.3.
msgspec is used only where it writes exactly the bytes pydantic writes, so nothing stored
changes and no format moves:

* a type is taken only when every field it declares, at any depth, is of a kind both write
  alike (``str``, ``int``, ``bool``, ``None``, a ``datetime``, a literal of those, lists,
  ``dict`` with ``str`` keys, unions of them and of such dataclasses); a type with anything
  else (``bytes``, ``float``, ``Decimal``, an enum class, ...) is always left to pydantic;
* a value under ``Any`` is looked at each time: only plain JSON data (``str``, ``int``,
  ``bool``, ``None``, and ``list`` and ``dict`` of them) goes to msgspec. Anything else keeps
  pydantic's meaning: ``bytes`` are written as UTF-8 text by pydantic and as base64 by msgspec,
  a float in exponent form is ``1e+16`` to one and ``1e16`` to the other, and models, paths and
  the like only pydantic knows;
* a value whose type is not the one declared (a subclass, a union member of another class) is
  left to pydantic, which writes the declared fields only;
* whatever msgspec refuses (a string with a lone surrogate, an integer past its range) goes to
  pydantic, which writes it or says why not, as it always did.

``tests/records/test_fast_json.py`` checks byte for byte that both write the same for values
of every stored type built from their declarations.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["writer"]

Look = Callable[[Any], bool]
"""Whether a value may be written by msgspec (its declared type alone does not say)."""


class _Unsupported(Exception):
    """A declared type msgspec may write otherwise than pydantic."""


def _refuse(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is pydantic's to write")


_encode = msgspec.json.Encoder(enc_hook=_refuse).encode
_LEAVES = (str, int, bool, type(None), datetime.datetime)


def _plain(value: Any) -> bool:
    """Plain JSON data: what both libraries write alike under ``Any``."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is list:
        return _plain_items(value)
    if kind is dict:
        for key in value:
            if type(key) is not str:
                return False
        return _plain_items(value.values())
    return False


def _plain_items(values: Any) -> bool:
    # A loop, not ``all`` over a generator: a checkpoint's few extras are looked at each step.
    for v in values:
        kind = type(v)
        if not (kind is str or kind is int or kind is bool or v is None or _plain(v)):
            return False
    return True


class _Source:
    """The text of a type's look, built once: one generated function, no call per field.

    Closures per field took about as long as msgspec's writing itself (1 us for a run record);
    the generated expression reads each field once and tests plain classes by identity.
    """

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"_plain": _plain, "_plain_items": _plain_items}
        self._ids: dict[int, str] = {}
        self._vars = 0

    def name(self, obj: Any) -> str:
        key = self._ids.get(id(obj))
        if key is None:
            key = self._ids[id(obj)] = f"_c{len(self._ids)}"
            self.names[key] = obj
        return key

    def var(self) -> str:
        self._vars += 1
        return f"_v{self._vars}"


def _unwrap(hint: Any) -> Any:
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def _look_of(hint: Any, value: str, src: _Source, building: frozenset[type]) -> str | None:
    """The test of ``value`` (an expression) of ``hint``, ``None`` for none needed.

    Raises ``_Unsupported`` for a declared type msgspec may write otherwise than pydantic.
    """
    hint = _unwrap(hint)
    origin = typing.get_origin(hint)
    if hint is Any or hint is object:
        return f"({value} is None or _plain({value}))"
    if hint in _LEAVES:
        return None
    if origin is typing.Literal:
        if all(type(v) in (str, int, bool) or v is None for v in typing.get_args(hint)):
            return None
        raise _Unsupported(hint)
    if origin in (list, tuple) or origin is typing.Sequence:
        args = typing.get_args(hint)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise _Unsupported(hint)
        item = src.var()
        inner = _look_of(args[0], item, src, building) if args else f"_plain({item})"
        # An empty list (the usual media, say) costs no generator.
        return None if inner is None else f"(not {value} or all({inner} for {item} in {value}))"
    if origin is dict:
        key, of = typing.get_args(hint) or (str, Any)
        if key is not str:
            raise _Unsupported(hint)
        if _unwrap(of) in (Any, object):
            return f"_plain({value})"  # keys and values, in a loop
        item = src.var()
        inner = _look_of(of, item, src, building)
        return None if inner is None else f"all({inner} for {item} in {value}.values())"
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(hint), value, src, building)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        # Of this very class: msgspec writes a subclass's own fields, pydantic the declared.
        fields = _fields_look(hint, value, src, building)
        test = f"type({value}) is {src.name(hint)}"
        return test if fields is None else f"({test} and {fields})"
    raise _Unsupported(hint)


def _union(
    members: tuple[Any, ...], value: str, src: _Source, building: frozenset[type]
) -> str | None:
    """A union's value: of one of its members' own classes, and good for that member."""
    tests: list[str] = []
    needed = False
    for member in map(_unwrap, members):
        origin = typing.get_origin(member)
        if member is type(None):
            tests.insert(0, f"{value} is None")  # the commonest value, tested first
            continue
        if origin is typing.Literal:
            _look_of(member, value, src, building)  # raises when not written alike
            classes = {type(v) for v in typing.get_args(member)}
            tests.extend(f"type({value}) is {src.name(c)}" for c in classes)
            continue
        inner = _look_of(member, value, src, building)
        if isinstance(member, type) and dataclasses.is_dataclass(member):
            needed = True
            tests.append(inner or f"type({value}) is {src.name(member)}")
            continue
        needed = needed or inner is not None
        cls = src.name(origin if origin is not None else member)
        tests.append(
            f"type({value}) is {cls}" if inner is None else f"(type({value}) is {cls} and {inner})"
        )
    return f"({' or '.join(tests)})" if needed else None


def _fields_look(cls: type, value: str, src: _Source, building: frozenset[type]) -> str | None:
    """The tests of the fields of ``value``, an instance of ``cls``; ``None`` for none."""
    if cls in building:
        raise _Unsupported(cls)  # a recursive type: not worth a writer of its own
    hints = typing.get_type_hints(cls, include_extras=True)
    tests = [
        test
        for f in dataclasses.fields(cls)
        if (test := _look_of(hints[f.name], f"{value}.{f.name}", src, building | {cls}))
    ]
    return " and ".join(tests) if tests else None


def _compiled(tp: type) -> Look | None:
    src = _Source()
    body = _fields_look(tp, "value", src, frozenset())
    if body is None:
        return None
    namespace = dict(src.names)
    exec(f"def look(value):\n    return {body}\n", namespace)  # noqa: S102 - our own text
    return typing.cast(Look, namespace["look"])


def writer(tp: Any) -> Callable[[Any], bytes | None] | None:
    """A msgspec writer of values of exactly the dataclass ``tp``, or ``None`` when it has none.

    The writer returns ``None`` for a value it leaves to pydantic (see the module's docstring).
    """
    if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return None
    try:
        look = _compiled(tp)
    except (_Unsupported, NameError, TypeError):
        return None

    def write(value: Any) -> bytes | None:
        if type(value) is not tp or (look is not None and not look(value)):
            return None
        try:
            return _encode(value)
        except Exception:  # noqa: BLE001 - pydantic writes it, or says what is wrong
            return None

    return write
