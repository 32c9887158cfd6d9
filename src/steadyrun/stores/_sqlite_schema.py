"""The SQLite schema as an append-only list of migrations; a migration's index + 1 is its version.

Never edit a migration that has shipped: add a new one. ``PRAGMA user_version`` holds the version
a file is at. A file at a version above ``len(MIGRATIONS)`` was written by a newer release and is
refused.

Versions:
    1: runs, context log, calls, blocks, feed and feed state; indexes for listing runs.
    2: work (claims of runs: owner, fencing token, expiry; wake-ups for workers) and work_log
       (who wrote each fenced step); see ``steadyrun.stores._leases``.
    3: feed deduplicated on the pair (message_id, revision) instead of the text key
       ``id@revision``, which let ``("a", "b@1")`` pass for ``("a@b", "1")``. The table is
       rebuilt (DROP COLUMN needs SQLite 3.35) with the pair read from each stored message.
    4: step_history (one entry per step: its checkpoint, usage, calls and where its messages
       lie in the context log) and context_segments (the log segments context rewrites
       replaced), for listing a run's steps and forking from one; see
       ``steadyrun.stores._history``. Steps saved before have no entry.
    5: call rows may refer to the context log for their arguments, result and error
       (call documents of format 2, see ``steadyrun.stores._call_rows``) instead of holding a
       second copy. No table changes and no row is rewritten: rows of format 1 stay as they
       are and read as before (rewriting them would decode every run's log inside the
       migration's write transaction, holding the file's lock for as long; a row becomes
       format 2 when a later step merges it). The version keeps releases that cannot read
       format 2 away from the file.
    6: work_log becomes a WITHOUT ROWID table keyed (root, row_id), its lookup key, so the
       line each fenced step adds is one b-tree page written per commit instead of two (the
       rowid table and the index ``work_log_by_root``). ``row_id`` keeps the order of writes
       within a root: new lines take the root's largest + 1, the copied lines keep theirs.
       (step_history, written each step too, stays a rowid table: its entries of ~400 bytes
       appended to an index b-tree split three pages at a time, more than its index costs.)
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

MIGRATIONS: tuple[str, ...] = (
    # 1
    """
    CREATE TABLE runs (
        run_id      TEXT PRIMARY KEY,
        agent       TEXT NOT NULL,
        status      TEXT NOT NULL,
        created_us  INTEGER,
        updated_us  INTEGER,
        steps       INTEGER NOT NULL,
        record      BLOB NOT NULL,
        checkpoint  BLOB NOT NULL
    );
    CREATE INDEX runs_by_update ON runs (updated_us DESC, run_id DESC);
    CREATE INDEX runs_by_status ON runs (status, updated_us DESC, run_id DESC);
    CREATE INDEX runs_by_agent ON runs (agent, updated_us DESC, run_id DESC);

    -- A rowid table: messages of a kilobyte or more would each spill into a mostly empty
    -- overflow page in a WITHOUT ROWID table.
    CREATE TABLE context (
        run_id   TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        idx      INTEGER NOT NULL,
        message  BLOB NOT NULL,
        PRIMARY KEY (run_id, idx)
    );

    CREATE TABLE calls (
        run_id   TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        call_id  TEXT NOT NULL,
        rev      INTEGER NOT NULL,
        status   TEXT NOT NULL,
        record   BLOB NOT NULL,
        UNIQUE (run_id, call_id)
    );

    CREATE TABLE blocks (
        run_id    TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        block_id  TEXT NOT NULL,
        position  INTEGER NOT NULL,
        block     BLOB NOT NULL,
        PRIMARY KEY (run_id, block_id)
    ) WITHOUT ROWID;

    CREATE TABLE feed (
        run_id   TEXT NOT NULL,
        seq      INTEGER NOT NULL,
        key      TEXT NOT NULL,
        message  BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX feed_by_key ON feed (run_id, key);

    CREATE TABLE feed_state (
        run_id    TEXT PRIMARY KEY,
        consumed  INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
    # 2
    """
    CREATE TABLE work (
        run_id      TEXT PRIMARY KEY,
        wanted      INTEGER NOT NULL DEFAULT 0,
        handled     INTEGER NOT NULL DEFAULT 0,
        woken_us    INTEGER NOT NULL DEFAULT 0,
        owner       TEXT,
        token       INTEGER NOT NULL DEFAULT 0,
        expires_us  INTEGER
    ) WITHOUT ROWID;
    CREATE INDEX work_runnable ON work (woken_us) WHERE wanted > handled;

    CREATE TABLE work_log (
        row_id  INTEGER PRIMARY KEY,
        root    TEXT NOT NULL,
        run_id  TEXT NOT NULL,
        steps   INTEGER NOT NULL,
        owner   TEXT NOT NULL,
        token   INTEGER NOT NULL
    );
    CREATE INDEX work_log_by_root ON work_log (root, row_id);
    """,
    # 3
    """
    CREATE TABLE feed_v3 (
        run_id      TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        message_id  TEXT NOT NULL,
        revision    TEXT NOT NULL,
        message     BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    INSERT INTO feed_v3 (run_id, seq, message_id, revision, message)
        SELECT run_id, seq, json_extract(CAST(message AS TEXT), '$.data.id'),
            json_extract(CAST(message AS TEXT), '$.data.revision'), message
        FROM feed;
    DROP TABLE feed;
    ALTER TABLE feed_v3 RENAME TO feed;
    CREATE UNIQUE INDEX feed_by_message ON feed (run_id, message_id, revision);
    """,
    # 4
    """
    CREATE TABLE step_history (
        run_id   TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        step     INTEGER NOT NULL,
        segment  INTEGER NOT NULL,
        entry    BLOB NOT NULL,
        PRIMARY KEY (run_id, step)
    );

    CREATE TABLE context_segments (
        run_id   TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        segment  INTEGER NOT NULL,
        idx      INTEGER NOT NULL,
        message  BLOB NOT NULL,
        PRIMARY KEY (run_id, segment, idx)
    );
    """,
    # 5: only the version changes (see above); SQLite needs a statement to run.
    """
    SELECT 1;
    """,
    # 6
    """
    CREATE TABLE work_log_v6 (
        root    TEXT NOT NULL,
        row_id  INTEGER NOT NULL,
        run_id  TEXT NOT NULL,
        steps   INTEGER NOT NULL,
        owner   TEXT NOT NULL,
        token   INTEGER NOT NULL,
        PRIMARY KEY (root, row_id)
    ) WITHOUT ROWID;
    INSERT INTO work_log_v6 (root, row_id, run_id, steps, owner, token)
        SELECT root, row_id, run_id, steps, owner, token FROM work_log;
    DROP TABLE work_log;
    ALTER TABLE work_log_v6 RENAME TO work_log;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this release writes."""
