"""What the stores do per loop iteration, counted (not timed), for tests and benchmarks.

``count_loop(kind, ...)`` drives a real ``Runtime`` over a tool loop (one tool call per model
call, a 1 KiB argument, as in the peer harness) and counts what happens between two model calls
``WINDOW_START`` and ``WINDOW_START + iterations``: whole iterations only, so opening the store,
creating the run and finishing it are left out. Counts are exact and stable, unlike times.

What is counted, and how:

* ``commits``: write transactions committed. SQLite: a ``COMMIT`` after a write, or a write
  outside a transaction (autocommit). PostgreSQL: the same, seen from psycopg (the server's
  xid counter is shared with every other test on the server). With ``synchronous=FULL`` and on
  a PostgreSQL server with ``synchronous_commit=on``, each commit waits for one WAL flush.
* ``synced_commits`` (SQLite): the commits made while their connection's ``synchronous`` was
  ``FULL`` or ``EXTRA``, each of which waits for an fdatasync of the WAL (the level is read at
  connect and followed through the connection's ``PRAGMA synchronous`` statements). A WAL
  commit under ``NORMAL`` (a lease-only write group: ``SqliteThread.write(durable=False)``)
  has no fsync of its own; the next synced commit makes it durable too.
* ``transactions``: every ``COMMIT``, read-only ones included.
* ``statements``: every SQL statement the store runs, ``BEGIN`` and ``COMMIT`` included
  (SQLite: ``set_trace_callback``; trigger bodies are not counted). ``selects`` is the part of
  them that only reads.
* ``hops``: functions handed to a SQLite thread (``SqliteThread._hand_off``): each
  ``SqliteThread.run`` call, and per write group its ``COMMIT`` (the group's statements run on
  the loop) or, when the file was locked, the whole group. Write jobs queued together share
  one hop. Reads through ``SqliteThread.read`` run on the loop itself (a reader connection): no
  hop, but their statements are counted. The idle writer's WAL checkpoint (``PRAGMA
  wal_checkpoint``, one per ~900 pages of log) is neither a statement nor a hop here, as
  SQLite's own checkpoint inside a ``COMMIT`` never was: housekeeping, not the loop's work.
* ``round_trips`` (PostgreSQL): the times the client must wait for the server's answer: each
  statement outside a pipeline, and in a pipeline each sync and each fetch of a result. The
  loop step's statement goes through libpq without a cursor (``stores._postgres_wire``):
  counted by a hook of its own, one round trip (two where a connection prepares it first).
* ``encodes``, ``decodes``, ``encoded_bytes``: calls of the codec (``steadyrun._codec``, and
  the SQL stores' call-row encoder and decoder ``stores._call_rows.encode_row`` and
  ``decode_rows``) and the bytes produced.
* ``copies``: calls of ``dataclasses.replace`` and of its faster ``records._copy.copied`` by
  steadyrun's modules (each copies a record, a checkpoint, a usage...): the runtime's own work
  per iteration, whatever the store.
* ``written_bytes``: what the process passed to ``write()`` in the window (``/proc/self/io``,
  every thread): SQLite's WAL frames, and its checkpoints when one falls in the window (one
  per ~3.6 MB of WAL). Sends to a socket are not counted, so it is 0 for PostgreSQL.

The patches are installed for the whole run and count only inside the window, so the store's
own set-up does not leak in. A helper that changes how the stores reach their database must
keep these hooks pointed at it (the test fails loudly when a count drops to zero).
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun import _codec
from steadyrun._sqlite_thread import SqliteThread
from steadyrun.chat import ToolResultPart
from steadyrun.records import _copy
from steadyrun.stores import _call_rows
from steadyrun.testing import FunctionModel, call, text, tool_calls

WINDOW_START = 2
"""Tool results already in the conversation when counting starts (the first steps differ)."""

ECHO_BYTES = 1024

KINDS = ("memory", "sqlite", "postgres")


@dataclass
class Counts:
    """Totals over a window of ``iterations`` loop iterations."""

    iterations: int = 0
    commits: int = 0
    synced_commits: int = 0
    transactions: int = 0
    statements: int = 0
    selects: int = 0
    hops: int = 0
    round_trips: int = 0
    encodes: int = 0
    decodes: int = 0
    encoded_bytes: int = 0
    written_bytes: int = 0
    copies: int = 0
    statement_log: list[str] = field(default_factory=list, repr=False)

    def per_iteration(self) -> dict[str, float]:
        """Every count divided by the iterations of the window."""
        n = max(1, self.iterations)
        return {
            f.name: getattr(self, f.name) / n
            for f in fields(self)
            if f.name not in ("iterations", "statement_log")
        }


class Counter:
    """Counts while ``active``; the hooks below call ``add``; ``start``/``stop`` a window."""

    def __init__(self) -> None:
        self.counts = Counts()
        self.active = False
        self._wchar = 0

    def start(self) -> None:
        self.active = True
        self._wchar = _wchar()

    def stop(self) -> None:
        self.active = False
        self.counts.written_bytes += _wchar() - self._wchar

    def add(self, name: str, amount: int = 1) -> None:
        if self.active:
            setattr(self.counts, name, getattr(self.counts, name) + amount)

    def log(self, sql: str) -> None:
        if self.active:
            self.counts.statement_log.append(" ".join(sql.split())[:120])


def _wchar() -> int:
    """Bytes this process passed to ``write()`` so far (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# -- classifying SQL ---------------------------------------------------------------------------

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT")
_WRITING_FUNCTIONS = ("SAVE_LOOP_STEP(",)
"""Server functions of the stores that write: a ``SELECT`` of one is a write (a commit)."""


def _verb(sql: str) -> str:
    return sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""


def _is_write(sql: str) -> bool:
    verb = _verb(sql)
    if verb == "WITH":  # a CTE writes when any part of it does
        upper = sql.upper()
        return any(f"{w} " in upper for w in _WRITES)
    if verb == "SELECT":
        upper = sql.upper()
        if any(f in upper for f in _WRITING_FUNCTIONS):
            return True
        return "FOR UPDATE" in upper or "FOR SHARE" in upper  # row locks take a transaction id
    return verb in _WRITES


_SYNCHRONOUS = re.compile(r"PRAGMA\s+(?:main\.)?synchronous\s*=\s*(\w+)", re.IGNORECASE)
_LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}


def _synchronous_set(sql: str, level: int) -> int:
    """The connection's ``synchronous`` level after the PRAGMA ``sql`` (unchanged by others)."""
    match = _SYNCHRONOUS.match(sql.strip())
    if match is None:
        return level
    value = match.group(1).upper()
    return int(value) if value.isdigit() else _LEVELS.get(value, level)


def _is_select(sql: str) -> bool:
    return _verb(sql) in ("SELECT", "WITH") and not _is_write(sql)


# -- the hooks ---------------------------------------------------------------------------------


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    missing = object()
    # On a class, only its own attribute is restored; an inherited one is shadowed, then unset.
    old = owner.__dict__.get(name, missing) if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if old is missing:
            delattr(owner, name)
        else:
            setattr(owner, name, old)


def _hook_codec(counter: Counter, stack: ExitStack) -> None:
    """Count the codec's calls wherever a module imported them by name."""
    encode, decode = _codec.encode, _codec.decode

    def counted_encode(obj: Any, tp: Any | None = None) -> bytes:
        out = encode(obj, tp)
        counter.add("encodes")
        counter.add("encoded_bytes", len(out))
        return out

    def counted_decode(raw: bytes | str, tp: Any) -> Any:
        counter.add("decodes")
        return decode(raw, tp)

    encode_row = _call_rows.encode_row

    def counted_encode_row(record: Any, spots: Any) -> bytes:
        # The SQL stores' call rows: an encode of the codec's kind, by another function.
        out = encode_row(record, spots)
        counter.add("encodes")
        counter.add("encoded_bytes", len(out))
        return out

    decode_rows = _call_rows.decode_rows

    def counted_decode_rows(raws: Any) -> Any:
        # The SQL stores' call rows read back: one decode of the codec's kind per call.
        counter.add("decodes")
        return decode_rows(raws)

    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("steadyrun"):
            continue
        for name, original, counted in (
            ("encode", encode, counted_encode),
            ("decode", decode, counted_decode),
            ("encode_row", encode_row, counted_encode_row),
            ("decode_rows", decode_rows, counted_decode_rows),
        ):
            if getattr(module, name, None) is original:
                stack.enter_context(_patched(module, name, counted))


def _hook_copies(counter: Counter, stack: ExitStack) -> None:
    """Count ``dataclasses.replace`` and ``records._copy.copied`` wherever a steadyrun module
    imported them by name."""
    for name, original in (("replace", dataclasses.replace), ("copied", _copy.copied)):

        def counted(obj: Any, /, _original: Any = original, **changes: Any) -> Any:
            counter.add("copies")
            return _original(obj, **changes)

        for module in list(sys.modules.values()):
            if not getattr(module, "__name__", "").startswith("steadyrun"):
                continue
            if getattr(module, name, None) is original:
                stack.enter_context(_patched(module, name, counted))


def _hook_sqlite(counter: Counter, stack: ExitStack) -> None:
    """Trace the statements of every SQLite connection opened from now on."""
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def committed() -> None:
            counter.add("commits")
            if level[0] >= 2:  # FULL or EXTRA: the commit waits for an fdatasync
                counter.add("synced_commits")

        def trace(sql: str) -> None:
            if sql.startswith("--"):  # a trigger's body, not a statement of ours
                return
            if sql.startswith("PRAGMA wal_checkpoint"):
                return  # the idle writer's housekeeping, as SQLite's in a COMMIT was (below)
            verb = _verb(sql)
            counter.add("statements")
            counter.log(sql)
            if verb in ("COMMIT", "END"):
                counter.add("transactions")
                if writing[0]:
                    committed()
                writing[0] = False
            elif verb == "ROLLBACK":
                writing[0] = False
            elif verb == "PRAGMA":
                level[0] = _synchronous_set(sql, level[0])
            elif _is_write(sql):
                if conn.in_transaction:
                    writing[0] = True
                else:
                    committed()
                    counter.add("transactions")
            elif _is_select(sql):
                counter.add("selects")

        writing = [False]
        level = [int(conn.execute("PRAGMA synchronous").fetchone()[0])]  # before the trace
        conn.set_trace_callback(trace)
        return conn

    stack.enter_context(_patched(sqlite3, "connect", traced_connect))
    hand_off = SqliteThread._hand_off

    def counted_hand_off(self: SqliteThread, pool: Any, fn: Any, *args: Any) -> None:
        if getattr(fn, "__func__", None) is not SqliteThread._checkpoint:
            counter.add("hops")  # a function handed to a thread: a run call, a commit, a group
        hand_off(self, pool, fn, *args)

    stack.enter_context(_patched(SqliteThread, "_hand_off", counted_hand_off))


def _hook_postgres(counter: Counter, stack: ExitStack) -> None:
    """Count statements, commits and waits for the server on every psycopg async connection."""
    import psycopg
    from psycopg.pq import TransactionStatus

    conn_cls, cursor_cls = psycopg.AsyncConnection, psycopg.AsyncCursor
    writing: dict[int, bool] = {}
    implicit: dict[int, bool] = {}
    wait, execute, executemany = conn_cls.wait, cursor_cls.execute, cursor_cls.executemany
    exec_command = conn_cls._exec_command

    def waits_for_server(conn: Any, gen: Any) -> bool:
        name = getattr(gen, "__qualname__", "") or type(gen).__name__
        pipeline = conn._pipeline
        if name.endswith("notifies"):
            return False  # a listener waiting for notifications, not a request
        if pipeline is None:
            if name.endswith(("_commit_gen", "_rollback_gen")):
                # psycopg ends every pooled connection's use with one; idle, it sends nothing
                return bool(conn.pgconn.transaction_status != TransactionStatus.IDLE)
            return True  # outside a pipeline every request waits for its answer
        if name.endswith(("_sync_gen", "Pipeline._exit_gen")):
            return True
        if name.endswith("_fetch_gen"):
            return bool(pipeline.result_queue)
        return False  # queued in the pipeline; the next sync or fetch carries it

    async def counted_wait(self: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(gen, "__qualname__", "")
        if name.endswith(("_sync_gen", "Pipeline._exit_gen")) and implicit.pop(id(self), False):
            counter.add("commits")
            counter.add("transactions")
        if waits_for_server(self, gen):
            counter.add("round_trips")
            counter.log(f"-- round trip: {getattr(gen, '__qualname__', '?')}")
        return await wait(self, gen, *args, **kwargs)

    def note(conn: Any, sql: str, times: int = 1) -> None:
        counter.add("statements", times)
        counter.log(sql)
        if _is_write(sql):
            if conn._num_transactions:
                writing[id(conn)] = True
            elif conn._pipeline is not None:
                # in a pipeline, statements outside a transaction() commit together at the sync
                implicit[id(conn)] = True
            elif conn.autocommit:
                counter.add("commits", times)
                counter.add("transactions", times)
        elif _is_select(sql):
            counter.add("selects", times)

    def text_of(query: Any) -> str:
        if isinstance(query, bytes):
            return query.decode()
        if isinstance(query, str):
            return query
        try:
            return str(query.as_string(None))
        except Exception:
            return str(query)

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(self.connection, text_of(query))
        return await execute(self, query, *args, **kwargs)

    async def counted_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params = list(params_seq)
        note(self.connection, text_of(query), len(params))
        return await executemany(self, query, params, **kwargs)

    def counted_exec_command(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        sql = text_of(command)
        verb = _verb(sql)
        counter.add("statements")
        counter.log(sql)
        if verb == "COMMIT":
            counter.add("transactions")
            if writing.pop(id(self), False):
                counter.add("commits")
        elif verb == "ROLLBACK":
            writing.pop(id(self), None)
        return exec_command(self, command, *args, **kwargs)

    from steadyrun.stores import _postgres_db, _postgres_wire

    call_prepared = _postgres_db.call_prepared

    async def counted_call(conn: Any, stmt: Any, params: Any) -> Any:
        # The loop step goes through libpq without a cursor: one statement in autocommit, one
        # round trip (two on a connection that has not prepared it yet).
        note(conn, stmt.sql.decode())
        fresh = stmt.name not in _postgres_wire._prepared.get(conn, ())
        counter.add("round_trips", 2 if fresh else 1)
        counter.log("-- round trip: call_prepared" + (" (prepared first)" if fresh else ""))
        return await call_prepared(conn, stmt, params)

    stack.enter_context(_patched(_postgres_db, "call_prepared", counted_call))
    stack.enter_context(_patched(conn_cls, "wait", counted_wait))
    stack.enter_context(_patched(cursor_cls, "execute", counted_execute))
    stack.enter_context(_patched(cursor_cls, "executemany", counted_executemany))
    stack.enter_context(_patched(conn_cls, "_exec_command", counted_exec_command))


@contextmanager
def counting(kind: str) -> Iterator[Counter]:
    """Install the hooks of ``kind`` (``memory``, ``sqlite``, ``postgres``); inactive at first."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    counter = Counter()
    with ExitStack() as stack:
        _hook_codec(counter, stack)
        _hook_copies(counter, stack)
        if kind == "sqlite":
            _hook_sqlite(counter, stack)
        elif kind == "postgres":
            _hook_postgres(counter, stack)
        yield counter


# -- the workload ------------------------------------------------------------------------------


def echo_text(k: int) -> str:
    """A 1 KiB argument whose first 6 characters are the step number (the harness's echo)."""
    return f"{k:06d}" + "x" * (ECHO_BYTES - 6)


def _results_in(request: sr.ModelRequest) -> int:
    return sum(
        1
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    )


def loop_agent(total: int, counter: Counter | None = None, iterations: int = 0) -> sr.Agent:
    """An agent that calls ``echo`` once per model call, ``total`` times, then answers.

    With a ``counter``, counting runs from the model call that sees ``WINDOW_START`` results
    to the one that sees ``WINDOW_START + iterations``.
    """

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        k = _results_in(request)
        if counter is not None:
            if k == WINDOW_START:
                counter.start()
            elif k == WINDOW_START + iterations:
                counter.stop()
                counter.counts.iterations = iterations
        if k < total:
            return tool_calls(call("echo", {"text": echo_text(k)}, id=f"call_{k}"))
        return text(f"done after {k} tool calls")

    async def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: What to return.
        """
        return text

    return sr.Agent(
        name="loop",
        model=FunctionModel(respond, name="count-loop"),
        tools=[sr.tool(echo)],
        limits=sr.Limits(max_iterations=total + 5),
    )


async def count_loop(
    kind: str, *, iterations: int = 10, dsn: str | None = None, path: Path | None = None
) -> Counts:
    """Run the loop on a fresh store of ``kind`` and count ``iterations`` whole iterations.

    Args:
        kind: ``memory``, ``sqlite`` (a file at ``path``, or in a temporary folder) or
            ``postgres`` (the database of ``dsn``).
        iterations: The window's length; the run makes ``WINDOW_START + iterations + 1`` calls.
        dsn: The PostgreSQL database, for ``postgres``.
        path: The SQLite file, for ``sqlite``.
    """
    total = WINDOW_START + iterations + 1
    with counting(kind) as counter, tempfile.TemporaryDirectory() as tmp:
        store: Any
        if kind == "sqlite":
            store = sr.SqliteStore(path or Path(tmp) / "counts.db")
        elif kind == "postgres":
            if dsn is None:
                raise ValueError("count_loop('postgres') needs a dsn")
            store = sr.PostgresStore(dsn)
        else:
            store = sr.MemoryStore()
        try:
            # No live feed: its listener lookups go by the clock (twice a second), not by the
            # iteration, so on a slow machine they added statements "per iteration".
            result = await sr.Runtime(store, live=False).run(
                loop_agent(total, counter, iterations), run_id="counted", input="Run the loop."
            )
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                await close()
    if result.status != "completed" or counter.counts.iterations != iterations:
        raise AssertionError(
            f"the counted run ended {result.status!r} ({result.error!r}) after "
            f"{counter.counts.iterations} of {iterations} counted iterations"
        )
    return counter.counts


COLUMNS = (
    "commits",
    "synced_commits",
    "transactions",
    "statements",
    "selects",
    "hops",
    "round_trips",
    "encodes",
    "decodes",
    "encoded_bytes",
    "written_bytes",
    "copies",
)


def table(per_kind: dict[str, Counts]) -> str:
    """A markdown table of the per-iteration counts, one row per store."""
    head = "| store | " + " | ".join(c.replace("_", " ") for c in COLUMNS) + " |"
    lines = [head, "|---" + "|---:" * len(COLUMNS) + "|"]
    for kind, counts in per_kind.items():
        per = counts.per_iteration()
        cells = [f"{per[c]:.4g}" if per[c] % 1 else f"{per[c]:.0f}" for c in COLUMNS]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
