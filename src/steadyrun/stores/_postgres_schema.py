"""The PostgreSQL schema as an append-only list of migrations; index + 1 is the version.

Never edit a migration that has shipped: add a new one. The table ``steadyrun_schema`` in the
store's schema holds one row per applied migration, so ``MAX(version)`` is the version a
database is at. A database at a version above ``len(MIGRATIONS)`` was written by a newer release
and is refused.

The tables mirror the SQLite store's: encoded documents as ``BYTEA``, times as ``BIGINT``
microseconds since the epoch. ``{s}`` in a statement stands for the quoted schema name.
``migrate`` applies what is missing under an advisory lock, so processes starting at once
migrate once.

Versions:
    1: runs, context log, calls, blocks, feed and feed state; indexes for listing runs.
    2: work (wake-ups and leases of runs for workers) and work_log (who wrote each fenced
       step); see ``steadyrun.stores._leases``.
    3: feed deduplicated on the pair (message_id, revision) instead of the text key
       ``id@revision``, which let ``("a", "b@1")`` pass for ``("a@b", "1")``; the pair is read
       from each stored message.
    4: step_history (one entry per step: its checkpoint, usage, calls and where its messages
       lie in the context log) and context_segments (the log segments context rewrites
       replaced), for listing a run's steps and forking from one; see
       ``steadyrun.stores._history``. Steps saved before have no entry.
    5: call rows may refer to the context log for their arguments, result and error (call
       documents of format 2, see ``steadyrun.stores._call_rows``); as in SQLite's version 5,
       no table changes and no row is rewritten: rows of format 1 read as before.
    6: the function ``save_loop_step``: a loop step (run row, fence, context append, call rows,
       blocks, history entry) in one statement, so one round trip and one commit; it refuses
       (SQLSTATE ``SR001``, or a unique violation) whatever it cannot write without reading
       first, and the store then takes its general path. No table changes.
    7: ``save_loop_step`` with one more argument, the run's claimed feed position, returning
       the feed's highest claimable sequence number above it (0 for none): the step's commit
       tells the loop whether input waits, so it reads the feed in no round trip of its own.
       An overload that calls version 6's function (kept); no table changes.
    8: version 6's ``save_loop_step`` (which version 7's calls) updates the settled calls
       one by one by their key. Planned as one join with the arrays, the update read and
       hashed every call row of the run at each step, so a step's cost on the server grew
       with the run. No table changes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg

from steadyrun._errors import FormatVersionError
from steadyrun.stores._sql_values import to_us

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "VERSION_TABLE", "migrate"]

_LOCK_MIGRATE = 0x53524D47  # "SRMG": the namespace (first key) of the migration's advisory lock

VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.steadyrun_schema (
    version     INTEGER PRIMARY KEY,
    applied_us  BIGINT NOT NULL
)
"""
"""The table of applied migrations, created (if missing) before any migration runs."""

# 6: one statement per loop step (see ``Versions`` and ``_postgres_fast``). Each check refuses
# the whole step (its statement rolls back) rather than reading something to decide.
_LOOP_STEP_V6 = """
    CREATE FUNCTION {s}.save_loop_step(
        p_run TEXT, p_agent TEXT, p_status TEXT, p_created BIGINT, p_updated BIGINT,
        p_steps BIGINT, p_record BYTEA, p_checkpoint BYTEA,
        p_fence_run TEXT, p_fence_owner TEXT, p_fence_token BIGINT,
        p_removed_blocks TEXT[], p_removed_calls TEXT[],
        p_segment BIGINT, p_at BIGINT, p_messages BYTEA[],
        p_new_ids TEXT[], p_new_revs BIGINT[], p_new_statuses TEXT[], p_new_records BYTEA[],
        p_set_ids TEXT[], p_set_revs BIGINT[], p_set_statuses TEXT[], p_set_records BYTEA[],
        p_set_held BYTEA[],
        p_block_ids TEXT[], p_block_positions BIGINT[], p_blocks BYTEA[],
        p_entry BYTEA
    ) RETURNS VOID LANGUAGE plpgsql AS $$
    DECLARE
        changed BIGINT;
    BEGIN
        -- The lease row first, FOR SHARE: a takeover waits for this step (fence_check's order).
        IF p_fence_run IS NOT NULL THEN
            PERFORM 1 FROM {s}.work WHERE run_id = p_fence_run AND token = p_fence_token
                FOR SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'lease of % is not token %', p_fence_run, p_fence_token
                    USING ERRCODE = 'SR001';
            END IF;
            INSERT INTO {s}.work_log (root, run_id, steps, owner, token)
                VALUES (p_fence_run, p_run, p_steps, p_fence_owner, p_fence_token);
        END IF;
        -- The run row next: steps of one run never interleave. It is there but for a run's
        -- first step (an UPDATE first: no speculative insertion into the key).
        UPDATE {s}.runs SET agent = p_agent, status = p_status, updated_us = p_updated,
                steps = p_steps, record = p_record, checkpoint = p_checkpoint
            WHERE run_id = p_run;
        IF NOT FOUND THEN
            INSERT INTO {s}.runs (run_id, agent, status, created_us, updated_us, steps, record,
                    checkpoint)
                VALUES (p_run, p_agent, p_status, p_created, p_updated, p_steps, p_record,
                    p_checkpoint);
        END IF;
        IF cardinality(p_removed_blocks) > 0 THEN
            DELETE FROM {s}.blocks WHERE run_id = p_run AND block_id = ANY(p_removed_blocks);
        END IF;
        IF cardinality(p_removed_calls) > 0 THEN
            DELETE FROM {s}.calls WHERE run_id = p_run AND call_id = ANY(p_removed_calls);
        END IF;
        -- The call rows refer to the appended messages in the segment the writer expects.
        IF COALESCE((SELECT segment FROM {s}.step_history WHERE run_id = p_run
                AND step < p_steps ORDER BY step DESC LIMIT 1), 0) <> p_segment THEN
            RAISE EXCEPTION 'run % is not in segment %', p_run, p_segment
                USING ERRCODE = 'SR001';
        END IF;
        -- The append continues the log: a gap refuses, a retry of the step violates the key.
        IF p_at > 0 AND NOT EXISTS (SELECT 1 FROM {s}.context WHERE run_id = p_run
                AND idx = p_at - 1) THEN
            RAISE EXCEPTION 'run % has no message %', p_run, p_at - 1 USING ERRCODE = 'SR001';
        END IF;
        IF cardinality(p_messages) > 0 THEN
            INSERT INTO {s}.context (run_id, idx, message)
                SELECT p_run, p_at + u.o - 1, u.m
                FROM unnest(p_messages) WITH ORDINALITY AS u(m, o) ORDER BY u.o;
        ELSIF EXISTS (SELECT 1 FROM {s}.context WHERE run_id = p_run AND idx >= p_at) THEN
            RAISE EXCEPTION 'run % has messages from %', p_run, p_at USING ERRCODE = 'SR001';
        END IF;
        -- Calls the writer does not know stored: a held one violates the key.
        IF cardinality(p_new_ids) > 0 THEN
            INSERT INTO {s}.calls (run_id, call_id, rev, status, record)
                SELECT p_run, u.i, u.r, u.st, u.rec
                FROM unnest(p_new_ids, p_new_revs, p_new_statuses, p_new_records)
                    WITH ORDINALITY AS u(i, r, st, rec, o)
                ORDER BY u.o;
        END IF;
        -- Calls merged with the row the writer last wrote: refused when it changed since.
        IF cardinality(p_set_ids) > 0 THEN
            UPDATE {s}.calls AS c SET rev = u.r, status = u.st, record = u.rec
                FROM unnest(p_set_ids, p_set_revs, p_set_statuses, p_set_records, p_set_held)
                    AS u(i, r, st, rec, held)
                WHERE c.run_id = p_run AND c.call_id = u.i AND c.record = u.held;
            GET DIAGNOSTICS changed = ROW_COUNT;
            IF changed <> cardinality(p_set_ids) THEN
                RAISE EXCEPTION 'a call of run % changed', p_run USING ERRCODE = 'SR001';
            END IF;
        END IF;
        IF cardinality(p_block_ids) > 0 THEN
            INSERT INTO {s}.blocks (run_id, block_id, position, block)
                SELECT p_run, u.i, u.p, u.b
                FROM unnest(p_block_ids, p_block_positions, p_blocks) AS u(i, p, b)
                ON CONFLICT (run_id, block_id) DO UPDATE SET position = excluded.position,
                    block = excluded.block;
        END IF;
        INSERT INTO {s}.step_history (run_id, step, segment, entry)
            VALUES (p_run, p_steps, p_segment, p_entry)
            ON CONFLICT (run_id, step) DO UPDATE SET segment = excluded.segment,
                entry = excluded.entry;
    END
    $$;
    """
"""Version 6's migration, as it shipped (version 8 replaces a part of it)."""


def _once(script: str, part: str) -> str:
    """``part``, which ``script`` (a migration) must hold exactly once."""
    if script.count(part) != 1:
        raise AssertionError(f"a migration does not hold exactly one {part[:40]!r}")
    return part


def _between(script: str, start: str, end: str) -> str:
    """The part of ``script`` from its one ``start`` up to (not with) its one ``end``."""
    return script[script.index(_once(script, start)) : script.index(_once(script, end))]


# Version 6's settle of a step's calls, as it shipped: what version 8 replaces.
_SETTLE_V6 = _between(
    _LOOP_STEP_V6, "\n        -- Calls merged with the row", "        IF cardinality(p_block_ids)"
)

_SETTLE_BY_KEY = """
        -- Calls merged with the row the writer last wrote: refused when it changed since.
        -- Each by its key: as one join with the arrays, the plan read and hashed every call
        -- row of the run, a cost that grew with the run at every step.
        FOR i IN 1 .. COALESCE(cardinality(p_set_ids), 0) LOOP
            UPDATE {s}.calls SET rev = p_set_revs[i], status = p_set_statuses[i],
                    record = p_set_records[i]
                WHERE run_id = p_run AND call_id = p_set_ids[i] AND record = p_set_held[i];
            IF NOT FOUND THEN
                RAISE EXCEPTION 'call % of run % changed', p_set_ids[i], p_run
                    USING ERRCODE = 'SR001';
            END IF;
        END LOOP;
"""


def _replaced(script: str, old: str, new: str) -> str:
    """``script`` with its one ``old`` part made ``new`` (a migration derived from another)."""
    return script.replace(_once(script, old), new)


MIGRATIONS: tuple[str, ...] = (
    # 1
    """
    CREATE TABLE {s}.runs (
        run_id      TEXT PRIMARY KEY,
        agent       TEXT NOT NULL,
        status      TEXT NOT NULL,
        created_us  BIGINT,
        updated_us  BIGINT,
        steps       BIGINT NOT NULL,
        record      BYTEA NOT NULL,
        checkpoint  BYTEA NOT NULL
    );
    CREATE INDEX runs_by_update ON {s}.runs (updated_us DESC NULLS LAST, run_id DESC);
    CREATE INDEX runs_by_status ON {s}.runs (status, updated_us DESC NULLS LAST, run_id DESC);
    CREATE INDEX runs_by_agent ON {s}.runs (agent, updated_us DESC NULLS LAST, run_id DESC);

    CREATE TABLE {s}.context (
        run_id   TEXT NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
        idx      BIGINT NOT NULL,
        message  BYTEA NOT NULL,
        PRIMARY KEY (run_id, idx)
    );

    CREATE TABLE {s}.calls (
        row_id   BIGINT GENERATED ALWAYS AS IDENTITY,
        run_id   TEXT NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
        call_id  TEXT NOT NULL,
        rev      BIGINT NOT NULL,
        status   TEXT NOT NULL,
        record   BYTEA NOT NULL,
        PRIMARY KEY (run_id, call_id)
    );
    CREATE INDEX calls_in_order ON {s}.calls (run_id, row_id);

    CREATE TABLE {s}.blocks (
        run_id    TEXT NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
        block_id  TEXT NOT NULL,
        position  BIGINT NOT NULL,
        block     BYTEA NOT NULL,
        PRIMARY KEY (run_id, block_id)
    );

    CREATE TABLE {s}.feed (
        run_id   TEXT NOT NULL,
        seq      BIGINT NOT NULL,
        key      TEXT NOT NULL,
        message  BYTEA NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE UNIQUE INDEX feed_by_key ON {s}.feed (run_id, key);

    CREATE TABLE {s}.feed_state (
        run_id    TEXT PRIMARY KEY,
        consumed  BIGINT NOT NULL
    );
    """,
    # 2
    """
    CREATE TABLE {s}.work (
        run_id      TEXT PRIMARY KEY,
        wanted      BIGINT NOT NULL DEFAULT 0,
        handled     BIGINT NOT NULL DEFAULT 0,
        woken_us    BIGINT NOT NULL DEFAULT 0,
        owner       TEXT,
        token       BIGINT NOT NULL DEFAULT 0,
        expires_us  BIGINT
    );
    CREATE INDEX work_runnable ON {s}.work (woken_us) WHERE wanted > handled;

    CREATE TABLE {s}.work_log (
        row_id  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        root    TEXT NOT NULL,
        run_id  TEXT NOT NULL,
        steps   BIGINT NOT NULL,
        owner   TEXT NOT NULL,
        token   BIGINT NOT NULL
    );
    CREATE INDEX work_log_by_root ON {s}.work_log (root, row_id);
    """,
    # 3
    """
    ALTER TABLE {s}.feed ADD COLUMN message_id TEXT, ADD COLUMN revision TEXT;
    UPDATE {s}.feed SET
        message_id = convert_from(message, 'UTF8')::json -> 'data' ->> 'id',
        revision = convert_from(message, 'UTF8')::json -> 'data' ->> 'revision';
    ALTER TABLE {s}.feed ALTER COLUMN message_id SET NOT NULL,
        ALTER COLUMN revision SET NOT NULL, DROP COLUMN key;
    CREATE UNIQUE INDEX feed_by_message ON {s}.feed (run_id, message_id, revision);
    """,
    # 4
    """
    CREATE TABLE {s}.step_history (
        run_id   TEXT NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
        step     BIGINT NOT NULL,
        segment  BIGINT NOT NULL,
        entry    BYTEA NOT NULL,
        PRIMARY KEY (run_id, step)
    );

    CREATE TABLE {s}.context_segments (
        run_id   TEXT NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
        segment  BIGINT NOT NULL,
        idx      BIGINT NOT NULL,
        message  BYTEA NOT NULL,
        PRIMARY KEY (run_id, segment, idx)
    );
    """,
    # 5: only the version changes (see above).
    """
    SELECT 1;
    """,
    # 6: see ``_LOOP_STEP_V6``.
    _LOOP_STEP_V6,
    # 7: the loop step that tells what waits in the feed (see above). Version 6's function
    # writes the step; the feed is read after it, in the same statement and transaction, so
    # an append committed before this read is seen and one committed after it is seen by the
    # next step (the executor reads nothing else in between).
    """
    CREATE FUNCTION {s}.save_loop_step(
        p_run TEXT, p_agent TEXT, p_status TEXT, p_created BIGINT, p_updated BIGINT,
        p_steps BIGINT, p_record BYTEA, p_checkpoint BYTEA,
        p_fence_run TEXT, p_fence_owner TEXT, p_fence_token BIGINT,
        p_removed_blocks TEXT[], p_removed_calls TEXT[],
        p_segment BIGINT, p_at BIGINT, p_messages BYTEA[],
        p_new_ids TEXT[], p_new_revs BIGINT[], p_new_statuses TEXT[], p_new_records BYTEA[],
        p_set_ids TEXT[], p_set_revs BIGINT[], p_set_statuses TEXT[], p_set_records BYTEA[],
        p_set_held BYTEA[],
        p_block_ids TEXT[], p_block_positions BIGINT[], p_blocks BYTEA[],
        p_entry BYTEA,
        p_claimed BIGINT
    ) RETURNS BIGINT LANGUAGE plpgsql AS $$
    DECLARE
        last_seq BIGINT;
    BEGIN
        PERFORM {s}.save_loop_step(p_run, p_agent, p_status, p_created, p_updated, p_steps,
            p_record, p_checkpoint, p_fence_run, p_fence_owner, p_fence_token,
            p_removed_blocks, p_removed_calls, p_segment, p_at, p_messages,
            p_new_ids, p_new_revs, p_new_statuses, p_new_records,
            p_set_ids, p_set_revs, p_set_statuses, p_set_records, p_set_held,
            p_block_ids, p_block_positions, p_blocks, p_entry);
        SELECT COALESCE(MAX(seq), 0) INTO last_seq FROM {s}.feed WHERE run_id = p_run;
        IF last_seq > GREATEST(p_claimed, COALESCE((SELECT MAX(consumed) FROM {s}.feed_state
                WHERE run_id = p_run), 0)) THEN
            RETURN last_seq;
        END IF;
        RETURN 0;
    END
    $$;
    """,
    # 8: version 6's function again, its settled calls updated one by one by key (see
    # above). Replaced, not dropped: version 7's calls it, and a process of version 6's
    # release, still connected, writes its steps with it.
    _replaced(
        _replaced(
            _replaced(_LOOP_STEP_V6, "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"),
            "    DECLARE\n        changed BIGINT;\n",  # the loop needs no row count
            "",
        ),
        _SETTLE_V6,
        _SETTLE_BY_KEY,
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this release writes."""


async def migrate(conn: psycopg.AsyncConnection[Any], schema: str, where: str) -> None:
    """Bring ``schema`` to ``SCHEMA_VERSION`` (``conn`` in autocommit mode); refuse a newer one.

    Raises:
        FormatVersionError: The database was written by a newer release.
    """
    s = f'"{schema}"'
    if await _version(conn, s, where) == SCHEMA_VERSION:
        return
    async with conn.transaction():
        # Several processes may start at once: one migrates, the others wait, then see it done.
        await conn.execute(
            f"SELECT pg_advisory_xact_lock({_LOCK_MIGRATE}, hashtext(%s))", (schema,)
        )
        cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if await cur.fetchone() is None:  # (CREATE SCHEMA IF NOT EXISTS needs more rights)
            await conn.execute(f"CREATE SCHEMA {s}")
        await conn.execute(VERSION_TABLE.format(s=s))
        version = await _version(conn, s, where)
        now = to_us(datetime.now(UTC))
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in statements(MIGRATIONS[number - 1].format(s=s)):
                await conn.execute(statement)
            await conn.execute(
                f"INSERT INTO {s}.steadyrun_schema (version, applied_us) VALUES (%s, %s)",
                (number, now),
            )


def statements(script: str) -> list[str]:
    """The statements of a script, split at the semicolons outside ``$$`` quotes."""
    out: list[str] = []
    current = ""
    for i, piece in enumerate(script.split("$$")):
        if i % 2:  # a function body: its semicolons are its own
            current += f"$${piece}$$"
            continue
        *ended, rest = piece.split(";")
        for part in ended:
            out.append(current + part)
            current = ""
        current += rest
    out.append(current)
    return [s.strip() for s in out if s.strip()]


async def _version(conn: psycopg.AsyncConnection[Any], s: str, where: str) -> int:
    """The schema version of the database (0 before the first migration)."""
    cur = await conn.execute("SELECT to_regclass(%s)", (f"{s}.steadyrun_schema",))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return 0
    cur = await conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {s}.steadyrun_schema")
    row = await cur.fetchone()
    version = int(row[0]) if row is not None else 0
    if version > SCHEMA_VERSION:
        raise FormatVersionError(f"PostgreSQL store {where}", version, SCHEMA_VERSION)
    return version
