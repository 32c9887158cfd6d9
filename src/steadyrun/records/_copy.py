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

_copiers: dict[type, Callable[[Any], Any]] = {}


def copied(obj: T, /, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``, for the slotted dataclasses of records.

    A shallow copy with ``changes`` set. A class ``replace`` would treat differently (frozen,
    with ``__post_init__``, with a field left out of ``__init__``, without slots) is copied by
    ``replace`` itself, so the result is always the same.
    """
    copier = _copiers.get(type(obj))
    if copier is None:
        copier = _copiers[type(obj)] = _copier(type(obj))
    if copier is dataclasses.replace:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    new = copier(obj)
    for name, value in changes.items():
        setattr(new, name, value)
    return new  # type: ignore[no-any-return]


def _copier(cls: type) -> Callable[[Any], Any]:
    params = getattr(cls, "__dataclass_params__", None)
    if (
        params is None
        or params.frozen
        or hasattr(cls, "__post_init__")
        or "__slots__" not in cls.__dict__
        or not all(f.init for f in dataclasses.fields(cls))
    ):
        return dataclasses.replace
    # Straight-line code (as dataclasses writes its own __init__): one assignment per field.
    names = [f.name for f in dataclasses.fields(cls)]
    lines = [f"    new.{name} = obj.{name}\n" for name in names]
    source = (
        "def copy(obj, _new=object.__new__, _cls=_cls):\n    new = _new(_cls)\n"
        + "".join(lines)
        + "    return new\n"
    )
    namespace: dict[str, Any] = {"_cls": cls}
    exec(source, namespace)
    copy: Callable[[Any], Any] = namespace["copy"]
    return copy
