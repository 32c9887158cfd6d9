"""A conformance suite for steadyrun stores: every rule of the store contract, as a check.

steadyrun's own stores run it in their tests; run it on yours (a whole ``Store``, or a
``Journal``, ``Feed`` or ``RunIndex`` alone: checks of ports a store lacks are skipped). Each
check gets a fresh, empty store from a factory, exercises one rule of the contracts in
``steadyrun.stores`` (``journal.*``, ``feed.*``, ``index.*``, ``claims.*``, and
``lifecycle.*`` for deleting, dumping and restoring run trees) and raises ``AssertionError``
saying what it expected when the store breaks the rule.

``expect_same_run(left, right, run_id)`` is the comparison the suite uses for a run tree held
by two stores (an export imported elsewhere, say): it raises ``AssertionError`` naming the
first difference.

All checks with one report::

    from steadyrun.testing.conformance import check_store, factory_from

    report = await check_store(factory_from(MyStore))  # or an async def returning a store
    print(report)
    report.raise_for_failures()

One pytest test per rule (the test ids are the check names)::

    import pytest
    from steadyrun.testing.conformance import CHECKS, factory_from, run_check

    @pytest.mark.parametrize("check", CHECKS)
    async def test_store_conformance(check: str, tmp_path: Path) -> None:
        await run_check(check, factory_from(lambda: MyStore(tmp_path / "runs.db")))

(under pytest-asyncio's strict mode, also mark the test ``@pytest.mark.asyncio``). A factory
is called once per check and must give an empty store each time: one file per pytest test is
enough with ``run_check``, while ``check_store`` needs a new file (or schema) per call. A store
needing more setup and teardown takes a factory of its own: any callable returning an async
context manager that yields the store, such as an ``@asynccontextmanager`` function that
creates a database schema and drops it afterwards.
"""

from steadyrun.testing.conformance._lifecycle import expect_same_run
from steadyrun.testing.conformance._registry import Check, Port
from steadyrun.testing.conformance._runner import (
    CHECKS,
    CheckSkipped,
    ConformanceReport,
    StoreFactory,
    check_store,
    factory_from,
    run_check,
    select_checks,
)

__all__ = [
    "CHECKS",
    "Check",
    "CheckSkipped",
    "ConformanceReport",
    "Port",
    "StoreFactory",
    "check_store",
    "expect_same_run",
    "factory_from",
    "run_check",
    "select_checks",
]
