"""Copies of the records a run changes at every step, without ``dataclasses.replace``'s cost.

``replace`` builds the copy through ``__init__`` with every field passed by keyword: 2 to 5 us
for a call record, and the loop makes eight such copies per iteration (a new snapshot of the
call as it starts and as it settles, the run row and the checkpoint of each step, ...). A
copier made once per class sets the slots of a new instance directly, in a tenth of the time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["copied"]

T = TypeVar("T")

_copiers: dict[type, tuple[Callable[[Any], Any], bool]] = {}


def copied(obj: T, /, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``, for the slotted dataclasses of records.

    A shallow copy with ``changes`` set. A class ``replace`` would treat differently (with
    ``__post_init__``, with a field left out of ``__init__``, without slots) is copied by
    ``replace`` itself, so the result is always the same. A frozen class is copied too (its
    fields set as its own ``__init__`` sets them, through ``object.__setattr__``): the display
    snapshots of ``steadyrun.stream`` are frozen, and a service copies them at every change.
    """
    entry = _copiers.get(type(obj))
    if entry is None:
        entry = _copiers[type(obj)] = _copier(type(obj))
    copier, frozen = entry
    if copier is dataclasses.replace:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    new = copier(obj)
    put = object.__setattr__ if frozen else setattr
    for name, value in changes.items():
        put(new, name, value)
    return new  # type: ignore[no-any-return]


def _copier(cls: type) -> tuple[Callable[[Any], Any], bool]:
    params = getattr(cls, "__dataclass_params__", None)
    if (
        params is None
        or hasattr(cls, "__post_init__")
        or "__slots__" not in cls.__dict__
        or not all(f.init for f in dataclasses.fields(cls))
    ):
        return dataclasses.replace, False
    # Straight-line code (as dataclasses writes its own __init__): one assignment per field;
    # a frozen class refuses ``new.name = ...``, so its fields are set as its __init__ sets them.
    names = [f.name for f in dataclasses.fields(cls)]
    if params.frozen:
        lines = [f"    _set(new, {name!r}, obj.{name})\n" for name in names]
    else:
        lines = [f"    new.{name} = obj.{name}\n" for name in names]
    source = (
        "def copy(obj, _new=object.__new__, _cls=_cls, _set=object.__setattr__):\n"
        "    new = _new(_cls)\n" + "".join(lines) + "    return new\n"
    )
    namespace: dict[str, Any] = {"_cls": cls}
    exec(source, namespace)
    copy: Callable[[Any], Any] = namespace["copy"]
    return copy, bool(params.frozen)
