"""Named conformance checks, grouped by the port they exercise."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from steadyrun.stores import Feed, Journal, Leases, RunIndex, Store
from steadyrun.stores._history import StepHistory
from steadyrun.stores._lifecycle import RunLifecycle

__all__ = ["PORTS", "Check", "CheckFn", "CheckList", "Port"]

Port = Literal["journal", "feed", "index", "claims", "lifecycle", "history"]
"""The part of a store a check exercises: ``Journal``, ``Feed``, ``RunIndex``, its claims, or
``RunLifecycle`` (deleting, dumping and restoring run trees), or ``StepHistory``."""


@runtime_checkable
class _Claims(Protocol):
    """A store that keeps the claims of its runs (``store.leases``)."""

    @property
    def leases(self) -> Leases:
        """The claims."""
        ...


@runtime_checkable
class _Lifecycle(RunLifecycle, Store, Protocol):
    """A whole store that also deletes, dumps and restores run trees (the checks need both)."""


@runtime_checkable
class _History(StepHistory, Store, Protocol):
    """A whole store that also lists the steps of runs (the fork check runs a run on it)."""


PORTS: dict[Port, type] = {
    "journal": Journal,
    "feed": Feed,
    "index": RunIndex,
    "claims": _Claims,
    "lifecycle": _Lifecycle,
    "history": _History,
}
"""The protocol a store must implement for the checks of each port to apply."""

CheckFn = Callable[[Store], Awaitable[None]]
"""The body of a check: exercises a fresh, empty store; raises ``AssertionError`` on a violation."""


@dataclass(frozen=True, slots=True)
class Check:
    """One rule of the store contract, checked on a fresh store.

    Attributes:
        name: ``port.rule_name``, e.g. ``journal.settled_outcome_is_final``.
        port: The port the rule belongs to.
        rule: The rule in one sentence (the first line of the check's docstring).
        fn: The check itself.
    """

    name: str
    port: Port
    rule: str
    fn: CheckFn

    async def __call__(self, store: Store) -> None:
        """Run the check on ``store``; raises ``AssertionError`` when the store breaks the rule."""
        await self.fn(store)


class CheckList:
    """The checks of one module, in definition order.

    Args:
        port: The port every check of the list belongs to; names get it as prefix.
    """

    def __init__(self, port: Port) -> None:
        self.port: Port = port
        self.checks: list[Check] = []

    def rule(self, name: str) -> Callable[[CheckFn], CheckFn]:
        """Register the decorated coroutine function as the check ``<port>.<name>``."""

        def register(fn: CheckFn) -> CheckFn:
            doc = inspect.getdoc(fn)
            if not doc:
                raise TypeError(f"check {name!r} needs a docstring stating its rule")
            full = f"{self.port}.{name}"
            if any(c.name == full for c in self.checks):
                raise ValueError(f"check {full!r} is defined twice")
            self.checks.append(Check(name=full, port=self.port, rule=doc.splitlines()[0], fn=fn))
            return fn

        return register
