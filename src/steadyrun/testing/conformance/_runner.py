"""Running the checks: each on a fresh store, one at a time or all of them with a report."""

from __future__ import annotations

import asyncio
import difflib
import traceback
import unittest
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType

from steadyrun._errors import UsageError
from steadyrun.stores import Store
from steadyrun.testing.conformance import (
    _answers,
    _calls,
    _claims,
    _commits,
    _feed,
    _history,
    _index,
    _journal,
    _lifecycle,
)
from steadyrun.testing.conformance._registry import PORTS, Check

__all__ = [
    "CHECKS",
    "CheckSkipped",
    "ConformanceReport",
    "StoreFactory",
    "check_store",
    "factory_from",
    "run_check",
    "select_checks",
]

CHECKS: Mapping[str, Check] = MappingProxyType(
    {
        check.name: check
        for module in (
            _journal,
            _calls,
            _commits,
            _answers,
            _feed,
            _index,
            _claims,
            _lifecycle,
            _history,
        )
        for check in module.CHECKS.checks
    }
)
"""Every check by name (``journal.*``, ``feed.*``, ``index.*``, ``claims.*``, ``lifecycle.*``,
``history.*``), in order.

Iterating gives the names, so ``@pytest.mark.parametrize("check", CHECKS)`` makes one test per
rule with the rule's name as its id.
"""

StoreFactory = Callable[[], AbstractAsyncContextManager[Store]]
"""Makes a fresh, empty store on entry and disposes of it on exit; called once per check."""

DEFAULT_TIME_LIMIT = 60.0
"""Seconds a check may take before it counts as failed (a store that hangs fails, not stalls)."""


def factory_from(make: Callable[[], Store] | Callable[[], Awaitable[Store]]) -> StoreFactory:
    """A ``StoreFactory`` from a function that makes a fresh store; the store is closed after.

    Args:
        make: Returns (or, when async, resolves to) a new empty store each time it is called.
            A store class whose constructor takes no arguments will do, e.g. ``MemoryStore``.

    Returns:
        A factory for ``run_check`` and ``check_store``.
    """

    @asynccontextmanager
    async def factory() -> AsyncIterator[Store]:
        made = make()
        store = await made if isinstance(made, Awaitable) else made
        try:
            yield store
        finally:
            await store.close()

    return factory


class CheckSkipped(unittest.SkipTest):
    """A check does not apply: the store does not implement the port it exercises.

    It derives from ``unittest.SkipTest``, so pytest and unittest report the test as skipped.
    """


def select_checks(only: Iterable[str] | None = None, skip: Iterable[str] = ()) -> list[str]:
    """Names of the checks matching ``only`` and not ``skip``, in run order.

    Args:
        only: Names or shell-style patterns (``"feed.*"``) of the checks to keep; all if ``None``.
        skip: Names or patterns of checks to leave out.

    Returns:
        The selected check names.

    Raises:
        UsageError: A name or pattern matches no check (a typo would silently check less).
    """
    keep = _matching(only, "only") if only is not None else set(CHECKS)
    drop = _matching(skip, "skip")
    return [name for name in CHECKS if name in keep and name not in drop]


def _matching(patterns: Iterable[str], what: str) -> set[str]:
    found: set[str] = set()
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        names = {name for name in CHECKS if fnmatchcase(name, pattern)}
        if not names:
            close = difflib.get_close_matches(pattern, list(CHECKS), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"{what}={pattern!r} matches no conformance check{hint}")
        found |= names
    return found


async def run_check(
    check: str | Check, factory: StoreFactory, *, time_limit: float = DEFAULT_TIME_LIMIT
) -> None:
    """Run one check on a fresh store from ``factory``.

    Args:
        check: The check or its name (an item of ``CHECKS``).
        factory: Makes the store; it is entered once and exited after the check.
        time_limit: Seconds the check may take.

    Raises:
        AssertionError: The store breaks the rule (also when the check times out). Any other
            exception the store raises propagates; both carry a note naming the rule.
        CheckSkipped: The store does not implement the port the check exercises.
        UsageError: No check has that name.
    """
    chosen = check if isinstance(check, Check) else _lookup(check)
    async with factory() as store:
        port = PORTS[chosen.port]
        if not isinstance(store, port):
            raise CheckSkipped(f"the store does not implement {port.__name__}")
        scope = asyncio.timeout(time_limit)
        try:
            async with scope:
                await chosen.fn(store)
        except Exception as exc:
            note = f"store conformance rule {chosen.name}: {chosen.rule}"
            if isinstance(exc, TimeoutError) and scope.expired():
                late = AssertionError(f"the check did not finish within {time_limit:g} s")
                late.add_note(note)
                raise late from exc
            exc.add_note(note)
            raise


def _lookup(name: str) -> Check:
    try:
        return CHECKS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(CHECKS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"no conformance check named {name!r}{hint}") from None


@dataclass(slots=True)
class ConformanceReport:
    """What ``check_store`` found; every check appears in exactly one of the three outcomes.

    Attributes:
        passed: Names of the checks the store passed, in run order.
        failed: Failed check name → what went wrong (the assertion message or the exception).
        skipped: Skipped check name → why.
        tracebacks: Failed check name → the full traceback, for debugging the store.
    """

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    tracebacks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether no check failed (skipped checks do not count against the store)."""
        return not self.failed

    def raise_for_failures(self) -> None:
        """Raise ``AssertionError`` naming every broken rule, unless none failed."""
        if self.failed:
            raise AssertionError(
                f"the store breaks {len(self.failed)} conformance rule(s):\n"
                + "\n".join(self._failure_lines())
            )

    def _failure_lines(self) -> list[str]:
        lines = []
        for name, message in self.failed.items():
            check = CHECKS.get(name)
            lines.append(f"FAILED {name}" + (f": {check.rule}" if check else ""))
            lines.extend(f"    {line}" for line in message.splitlines())
        return lines

    def __str__(self) -> str:
        total = len(self.passed) + len(self.failed) + len(self.skipped)
        lines = [
            f"store conformance: {total} checks, {len(self.passed)} passed, "
            f"{len(self.failed)} failed, {len(self.skipped)} skipped",
            *self._failure_lines(),
        ]
        reasons: dict[str, list[str]] = {}
        for name, reason in self.skipped.items():
            reasons.setdefault(reason, []).append(name)
        lines.extend(f"SKIPPED ({reason}): {', '.join(names)}" for reason, names in reasons.items())
        return "\n".join(lines)


async def check_store(
    factory: StoreFactory,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> ConformanceReport:
    """Run the checks one after another, each on a fresh store, and report every outcome.

    Args:
        factory: Makes a fresh, empty store per check (see ``factory_from``).
        only: Names or shell-style patterns of the checks to run (see ``select_checks``).
        skip: Names or patterns of checks not to run.
        time_limit: Seconds each check may take.

    Returns:
        The report; call ``raise_for_failures()`` on it to fail a test.
    """
    selected = set(select_checks(only, skip))
    not_skipped = set(select_checks(None, skip))
    report = ConformanceReport()
    for name, check in CHECKS.items():
        if name not in selected:
            reason = "not selected by only=" if name in not_skipped else "left out by skip="
            report.skipped[name] = reason
            continue
        try:
            await run_check(check, factory, time_limit=time_limit)
        except CheckSkipped as exc:
            report.skipped[name] = str(exc)
        except Exception as exc:
            report.failed[name] = _message(exc)
            report.tracebacks[name] = "".join(traceback.format_exception(exc))
        else:
            report.passed.append(name)
    return report


def _message(exc: BaseException) -> str:
    if isinstance(exc, AssertionError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
