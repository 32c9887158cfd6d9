"""The PostgreSQL store's two ways of writing a loop step, for tests that compare them.

A loop step goes out as one call of ``save_loop_step`` when the store knows what it assumes,
else by the general path (``_postgres_step``); ``general_path_only()`` sends every step the
general way, as before the function existed. The tests of the schema's migrations start
from a run that an earlier release left half written (``half_written``, ``as_left_by``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from loopsteps import loop_steps
from steadyrun.records import Step
from steadyrun.stores import PostgresStore, _postgres


@contextmanager
def general_path_only() -> Iterator[None]:
    """Every step through the general path, as before ``save_loop_step``."""
    fast = _postgres.fast_step
    _postgres.fast_step = lambda *a, **k: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _postgres.fast_step = fast


async def half_written(dsn: str) -> list[Step]:
    """A run of two tool calls, written up to its first call's settlement by this release.

    Returns all of the run's steps: the tests of a migration write the rest after it.
    """
    steps = loop_steps(2)
    async with PostgresStore(dsn) as store:
        for s in steps[:3]:
            await store.save_step("r", s)
    return steps


async def as_left_by(dsn: str, version: int, *statements: str) -> None:
    """The store's schema as the release of ``version`` left it.

    ``statements`` take away (or put back) what that release had differently; the versions
    after it are no longer recorded, so the next store migrates again.
    """
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        for statement in statements:
            await admin.execute(statement)
        await admin.execute("DELETE FROM steadyrun.steadyrun_schema WHERE version > %s", (version,))


async def loop_step_functions(dsn: str) -> list[str]:
    """The bodies of the schema's ``save_loop_step`` functions, by number of arguments."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'steadyrun' AND p.proname = 'save_loop_step'"
            " ORDER BY p.pronargs"
        )
        return [str(r[0]) for r in await cur.fetchall()]
