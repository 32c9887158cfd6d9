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

Documents written without their fields at their defaults (a step's history entry, the SQL
stores' call rows: pydantic's ``exclude_defaults``) are first turned into the dict of the fields
that differ from their defaults, by a function generated once per type (``_Omitting``).

``tests/records/test_fast_json.py`` checks byte for byte that both write the same for values
of every stored type built from their declarations, with and without their defaults.
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
        # One loop, no generator: a checkpoint's few extras are looked at each step.
        for key, v in value.items():
            if type(key) is not str:
                return False
            kind = type(v)
            if not (kind is str or kind is int or kind is bool or v is None or _plain(v)):
                return False
        return True
    return False


def _plain_items(values: Any) -> bool:
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


_NO_DEFAULT = object()


class _Omitting:
    """The generated functions that give a value as pydantic's ``exclude_defaults`` writes it.

    One per dataclass reached: a ``dict`` of the fields whose value differs from the field's
    default (a ``default_factory``'s value made once, compared, never handed out), in their
    declared order, nested dataclasses turned the same way. Values under ``Any`` go as they are:
    pydantic leaves them whole too.
    """

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.names: dict[tuple[type, frozenset[str]], str] = {}
        self.text: list[str] = []

    def function(self, cls: type, exclude: frozenset[str] = frozenset()) -> str:
        key = (cls, exclude)
        name = self.names.get(key)
        if name is not None:
            return name
        name = self.names[key] = f"_to{len(self.names)}"
        hints = typing.get_type_hints(cls, include_extras=True)
        lines = ["d = {}"]
        for f in dataclasses.fields(cls):
            if f.name in exclude:
                continue
            if f.default is not dataclasses.MISSING:
                default: Any = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = _NO_DEFAULT
            turned = self.turned(hints[f.name], "x")
            lines.append(f"x = value.{f.name}")
            if default is _NO_DEFAULT:
                lines.append(f"d[{f.name!r}] = {turned}")
            elif default is None:  # ``!=`` with None asks both sides; ``is`` tells at once
                lines.append(f"if x is not None: d[{f.name!r}] = {turned}")
            elif _bare(default) and _unwrap(hints[f.name]) is type(default):
                # A dataclass at its class's own defaults: differs exactly when one of its
                # fields does, so what it turns into is not empty (no comparison of each).
                lines.append(f"t = {turned}")
                lines.append(f"if t: d[{f.name!r}] = t")
            else:
                lines.append(f"if x != {self.src.name(default)}: d[{f.name!r}] = {turned}")
        lines.append("return d")
        self.text.append(f"def {name}(value):\n    " + "\n    ".join(lines) + "\n")
        return name

    def turned(self, hint: Any, value: str) -> str:
        """The expression of ``value`` (of ``hint``) as pydantic's ``exclude_defaults`` has it."""
        hint = _unwrap(hint)
        origin = typing.get_origin(hint)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return f"{self.function(hint)}({value})"
        if origin in (list, tuple) or origin is typing.Sequence:
            item = self.src.var()
            inner = self.turned(typing.get_args(hint)[0], item)
            return value if inner == item else f"[{inner} for {item} in {value}]"
        if origin is dict:
            item = self.src.var()
            inner = self.turned(typing.get_args(hint)[1], item)
            return value if inner == item else f"{{k: {inner} for k, {item} in {value}.items()}}"
        if origin is typing.Union or origin is types.UnionType:
            turned = value
            for member in map(_unwrap, typing.get_args(hint)):
                inner = self.turned(member, value)
                if inner != value:  # a dataclass, or made of them: by its own class
                    cls = typing.get_origin(member) or member
                    turned = f"({inner} if type({value}) is {self.src.name(cls)} else {turned})"
            return turned
        return value


def _bare(default: Any) -> bool:
    """Whether ``default`` is an instance of a dataclass made with no arguments."""
    cls = type(default)
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.eq:
        return False
    try:
        return bool(default == cls())
    except TypeError:  # a required field
        return False


def writer(
    tp: Any, *, omit_defaults: bool = False, exclude: frozenset[str] = frozenset()
) -> Callable[[Any], bytes | None] | None:
    """A msgspec writer of values of exactly the dataclass ``tp``, or ``None`` when it has none.

    The writer returns ``None`` for a value it leaves to pydantic (see the module's docstring).

    Args:
        tp: The dataclass.
        omit_defaults: Write as pydantic's ``exclude_defaults=True`` does.
        exclude: Fields left out (with ``omit_defaults``), as pydantic's ``exclude``.
    """
    if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return None
    try:
        look = _compiled(tp)
        turn = _omitting(tp, exclude) if omit_defaults else None
    except (_Unsupported, NameError, TypeError):
        return None

    def write(value: Any) -> bytes | None:
        if type(value) is not tp or (look is not None and not look(value)):
            return None
        try:
            return _encode(value if turn is None else turn(value))
        except Exception:  # noqa: BLE001 - pydantic writes it, or says what is wrong
            return None

    return write


def _omitting(tp: type, exclude: frozenset[str]) -> Callable[[Any], dict[str, Any]]:
    src = _Source()
    omitting = _Omitting(src)
    name = omitting.function(tp, exclude)
    namespace = dict(src.names)
    exec("\n".join(omitting.text), namespace)  # noqa: S102 - our own text
    return typing.cast(Callable[[Any], dict[str, Any]], namespace[name])
