"""A SIGKILLed client's last statement may still commit on the server after the kill.

A kill between sending ``COMMIT`` and reading its answer leaves the transaction to the server,
which commits it when it gets to it: a reader that looks at once may see the store as it was
before, and the next process then finds what the dead one committed. The chaos harness reads
the store after a kill only once the dead child's backends are gone (``pgkit.drain_backends``,
by the ``application_name`` every forked child gets: ``chaosproc.child_app_name``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).parent))

from chaosproc import child_app_name  # noqa: E402

import pgkit  # noqa: E402

pg_dsn = pgkit.database_fixture(prefix="steadyrun_drain")

# The child names its connection as a forked chaos child does, then sends one implicit
# transaction that cannot commit before the test lets go of the advisory lock it waits for,
# and then commits a second later (so a reader that does not wait for it looks too early).
CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {here!r})
    from chaosproc import child_app_name
    import psycopg
    os.environ["PGAPPNAME"] = child_app_name(os.getpid())
    conn = psycopg.connect({dsn!r}, autocommit=True)
    print("ready", flush=True)
    conn.execute(
        "INSERT INTO t VALUES (1); SELECT pg_advisory_xact_lock({key}); SELECT pg_sleep(1)"
    )
    """
)
KEY = 20_261_207


def test_a_killed_clients_commit_is_seen_once_its_backends_are_drained(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("SELECT pg_advisory_lock(%s)", (KEY,))
        code = CHILD.format(here=str(Path(__file__).parent), dsn=pg_dsn, key=KEY)
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        name = child_app_name(child.pid)
        waiting = False
        for _ in range(3000):  # the statement reached the server: its backend waits for the lock
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock'",
                (name,),
            ).fetchone()
            if row and row[0]:
                waiting = True
                break
            time.sleep(0.01)
        assert waiting, "the child's statement never reached the server"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        # The client is dead; its transaction is not: it commits once it has the lock.
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.execute("SELECT pg_advisory_unlock(%s)", (KEY,))
        pgkit.drain_backends(pg_dsn, name)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_draining_a_name_with_no_backend_returns_at_once(pg_dsn: str) -> None:
    pgkit.drain_backends(pg_dsn, child_app_name(2**22 + 7))
