"""Assertions for the checks: they run outside pytest, so each failure says what it expected."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = ["expect", "expect_equal", "expect_raises", "fail"]

_REPR_LIMIT = 240


def fail(message: str) -> NoReturn:
    """Raise ``AssertionError`` with ``message``."""
    raise AssertionError(message)


def expect(condition: bool, message: str) -> None:
    """Raise ``AssertionError`` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise AssertionError(message)


def expect_equal(actual: Any, expected: Any, what: str) -> None:
    """Raise ``AssertionError`` naming ``what`` and the first difference unless they are equal."""
    if actual != expected:
        raise AssertionError(f"{what}: {difference(actual, expected)}")


@contextmanager
def expect_raises(
    kind: type[BaseException] | tuple[type[BaseException], ...], what: str
) -> Iterator[None]:
    """Expect the block to raise ``kind``; anything else (or nothing) is a violation."""
    names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    try:
        yield
    except kind:
        return
    except Exception as exc:
        raise AssertionError(f"{what}: expected {names}, got {type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"{what}: expected {names}, nothing was raised")


def difference(actual: Any, expected: Any) -> str:
    """Describe how ``actual`` differs from ``expected``: fields of dataclasses, items of lists."""
    if (
        dataclasses.is_dataclass(actual)
        and not isinstance(actual, type)
        and type(actual) is type(expected)
    ):
        diffs = [
            f"{f.name}: expected {_short(getattr(expected, f.name))}, "
            f"got {_short(getattr(actual, f.name))}"
            for f in dataclasses.fields(actual)
            if getattr(actual, f.name) != getattr(expected, f.name)
        ]
        return f"{type(actual).__name__} differs in " + "; ".join(diffs)
    if isinstance(actual, list) and isinstance(expected, list):
        if len(actual) != len(expected):
            return (
                f"expected {len(expected)} item(s), got {len(actual)}: "
                f"expected {_short(expected)}, got {_short(actual)}"
            )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            if a != e:
                return f"item {i}: {difference(a, e)}"
    if isinstance(actual, dict) and isinstance(expected, dict) and actual.keys() == expected.keys():
        for key in expected:
            if actual[key] != expected[key]:
                return f"[{key!r}]: {difference(actual[key], expected[key])}"
    return f"expected {_short(expected)}, got {_short(actual)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."
