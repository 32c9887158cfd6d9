"""A scratch PostgreSQL database for a benchmark: created, its DSN given, dropped after."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator


@contextlib.contextmanager
def fresh_database(
    admin_dsn: str, prefix: str = "steadyrun_bench", hint: str = ""
) -> Iterator[str]:
    """Create a database named ``<prefix>_<random>``, yield its DSN, drop it (``FORCE``) after.

    A server that does not answer ends the benchmark with a sentence saying so (and ``hint``,
    what the benchmark can do without it).
    """
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        raise SystemExit(f"PostgreSQL does not answer ({exc}); start it{hint}") from exc
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
