"""Runs of the random fault-injection harness: the fork server, one run, a suite, the counts.

``one_run`` runs a seed's plan (``randomkit``) in a child process without a kill (the
baseline), then in fresh children killed at random kill points until one completes it, each
child with a second executor racing its own (``racer``); it then reads the store and the
effects file and checks the invariants (``randomcheck``, ``racer.check_races``). ``run_suite``
runs many, two at a time, and adds their counts to ``TOTALS`` for the summary line.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chaosproc
from chaostotals import TOTALS
from randomkit import (
    CHILD,
    DELEGATE,
    RUN_ID,
    TASK_SUFFIX,
    Observed,
    child_run,
    choose_kill,
    final_text,
    make_plan,
    read_effects,
    task_store_of,
)

import pgkit
import steadyrun as sr
from steadyrun.background import Task
from steadyrun.records import RunSnapshot
from steadyrun.stores import FeedMessage
from steadyrun.stores._leases import StepWriter

# -- the fork server ---------------------------------------------------------------------------


class ForkServer(chaosproc.ForkServer):
    """``random_child.py --serve``: forks each child from a process that imported everything.

    A request may carry ``kill_after`` (seconds): the server kills the child with SIGKILL that
    long after forking it, unless it exited first (it waits on a pidfd, without threads).
    """

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, CHILD)


@dataclass
class Child:
    """A finished child: how it ended and its report."""

    returncode: int
    report: dict[str, Any] | None
    stderr: str
    pid: int = 0

    @property
    def killed(self) -> bool:
        """Whether it died by SIGKILL."""
        return self.returncode == -signal.SIGKILL


def run_child(
    server: ForkServer, store: str, seed: int, kill: str, effects: Path, race: int | None = None
) -> Child:
    """One child on ``store`` running the plan of ``seed``, killed at ``kill``.

    With ``race`` (a seed for its moments) a second executor races the child's own.
    """
    argv = ["--store", store, "--seed", str(seed), "--kill-at", kill, "--effects", str(effects)]
    if race is not None:
        argv += ["--race", str(race)]
    kill_after = float(kill.partition(":")[2]) if kill.startswith("after:") else None
    code, out, err = server.run(argv, kill_after=kill_after)
    lines = out.strip().splitlines()
    report = json.loads(lines[-1]) if code == 0 and lines else None
    return Child(code, report, err, server.last_pid)


def settle_dead(store: str, child: Child) -> None:
    """Wait until what a killed child sent its store has taken effect, before reading it.

    On PostgreSQL a kill between ``COMMIT`` and its answer leaves the commit to the server,
    which may make it after a reader looked (``pgkit.drain_backends``); a SQLite writer dies
    with its process.
    """
    kind, _, where = store.partition(":")
    if kind == "postgres" and child.pid:
        pgkit.drain_backends(where.partition("|")[2], chaosproc.child_app_name(child.pid))


# -- reading the store -------------------------------------------------------------------------


_Loaded = tuple[RunSnapshot | None, dict[str, RunSnapshot], list[StepWriter]]


async def _load_with_children(store: Any) -> _Loaded:
    snapshot = await store.load(RUN_ID)
    children = {}
    for c in snapshot.calls if snapshot else []:
        if c.name == DELEGATE:
            child = await store.load(child_run(c.id))
            if child is not None:
                children[c.id] = child
    return snapshot, children, await store.leases.writers(RUN_ID)


def _read_tasks(spec: str) -> list[Task]:
    kind, _, where = spec.partition(":")
    if kind == "sqlite" and not Path(where).with_name("tasks.db").exists():
        return []
    if kind == "postgres":
        import psycopg

        schema, _, dsn = where.partition("|")
        with psycopg.connect(dsn) as conn:
            name = f'"{schema}{TASK_SUFFIX}".tasks'
            found = conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        if not (found and found[0]):
            return []

    async def read() -> list[Task]:
        store = task_store_of(spec)
        try:
            return list(await store.list_tasks(RUN_ID))
        finally:
            await store.close()

    return asyncio.run(read())


def observe(spec: str, *, tasks: bool = False) -> Observed:
    """Read the run, its child runs, its feed and how far it was consumed (and its tasks)."""
    from steadyrun._codec import decode

    kind, _, where = spec.partition(":")
    found_tasks = _read_tasks(spec) if tasks else []
    if kind == "sqlite":
        import sqlite3

        async def load_sqlite() -> _Loaded:
            async with sr.SqliteStore(where) as store:
                return await _load_with_children(store)

        snapshot, children, writers = asyncio.run(load_sqlite())
        conn = sqlite3.connect(where)
        try:
            rows = conn.execute("SELECT message FROM feed WHERE run_id = ? ORDER BY seq", (RUN_ID,))
            feed = [decode(row[0], FeedMessage) for row in rows]
            got = conn.execute("SELECT consumed FROM feed_state WHERE run_id = ?", (RUN_ID,))
            row = got.fetchone()
        finally:
            conn.close()
        return Observed(snapshot, feed, row[0] if row else 0, children, found_tasks, writers)
    import psycopg

    from steadyrun.stores._postgres import PostgresStore

    schema, _, dsn = where.partition("|")

    async def load_pg() -> _Loaded:
        async with PostgresStore(dsn, schema=schema, min_size=0, max_size=1) as store:
            return await _load_with_children(store)

    snapshot, children, writers = asyncio.run(load_pg())
    feed = []
    consumed = 0
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".feed',)).fetchone()
        if found and found[0]:
            rows = conn.execute(
                f'SELECT message FROM "{schema}".feed WHERE run_id = %s ORDER BY seq', (RUN_ID,)
            ).fetchall()
            feed = [decode(row[0], FeedMessage) for row in rows]
            state = conn.execute(
                f'SELECT consumed FROM "{schema}".feed_state WHERE run_id = %s', (RUN_ID,)
            ).fetchone()
            consumed = state[0] if state else 0
    return Observed(snapshot, feed, consumed, children, found_tasks, writers)


# -- one run, many runs ------------------------------------------------------------------------


@dataclass
class RunOutcome:
    """One random run, checked."""

    seed: int
    kills: Counter[str] = field(default_factory=Counter)  # by kind of kill point
    attempts: list[str] = field(default_factory=list)
    checked: int = 0
    violations: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    seen: Counter[str] = field(default_factory=Counter)
    races: Counter[str] = field(default_factory=Counter)  # the racer's tries by outcome...


def one_run(
    server: ForkServer,
    seed: int,
    fresh: Callable[[str], tuple[str, Path]],
    max_kills: int,
) -> RunOutcome:
    """The run of ``seed``: an uninterrupted baseline, then kills and resumes, then checks."""
    outcome = RunOutcome(seed)
    from racer import check_races, check_tries, read_races
    from randomcheck import Checker, check_run

    ck = Checker(f"seed {seed}")
    # The racer's moments come from their own generator: the kill points stay the seed's.
    races = random.Random(seed * 7927 + 5)
    try:
        plan = make_plan(seed)
        spec, effects = fresh(f"base-{seed}")
        straight = run_child(server, spec, seed, "0", effects, races.randrange(10**9))
        outcome.races += check_tries(ck, read_races(effects))
        if not ck.check(straight.report is not None, f"baseline failed: {straight.stderr}"):
            raise _Stop
        baseline = straight.report
        assert baseline is not None
        steers = sum(c.kind == "steer" for batch in plan for c in batch)
        ck.check(baseline["status"] == "completed", f"baseline ended {baseline['status']}")
        ck.check(
            baseline["text"] == final_text(plan, 1 + steers),
            f"baseline text {baseline['text']!r}",
        )
        rng = random.Random(seed * 7919 + 1)
        kills_wanted = rng.randint(1, max_kills)
        spec, effects = fresh(f"run-{seed}")
        killed: list[Observed] = []
        for attempt in range(max_kills + 20):
            kill = "0"
            if len(killed) < kills_wanted:
                kill = choose_kill(rng, baseline["counts"], baseline["seconds"], attempt)
            outcome.attempts.append(kill)
            child = run_child(server, spec, seed, kill, effects, races.randrange(10**9))
            if child.killed:
                outcome.kills[kill.partition(":")[0]] += 1
                settle_dead(spec, child)
                killed.append(observe(spec))
                continue
            exited = f"child exited {child.returncode}: {child.stderr}"
            if not ck.check(child.returncode == 0, exited):
                raise _Stop
            break
        else:
            ck.check(False, f"the run never completed: {outcome.attempts}")
            raise _Stop
        final = observe(spec, tasks=True)
        outcome.statuses = check_run(ck, plan, baseline, killed, final, read_effects(effects))
        lines = effects.read_text().splitlines() if effects.exists() else []
        outcome.races += check_races(ck, read_races(effects), lines, final)
    except _Stop:
        pass
    except Exception as exc:  # collected: every failing seed is reported at once
        ck.check(False, f"{type(exc).__name__}: {exc}")
    outcome.checked = ck.checked
    outcome.seen = ck.seen
    outcome.violations = [f"{v} (kills {outcome.attempts})" for v in ck.violations]
    return outcome


class _Stop(Exception):
    pass


@dataclass
class Settings:
    """How much to run: the CI default, or ``--long``."""

    runs: int
    max_kills: int
    seed: int
    only: int | None  # replay one run of the suite: CHAOS_SEED=<suite seed>/<index>
    long: bool


def settings(long: bool, runs_ci: int) -> Settings:
    """Settings from the environment: ``CHAOS_SEED``, ``CHAOS_RUNS``, long mode."""
    raw = os.environ.get("CHAOS_SEED", "")
    only = None
    if "/" in raw:
        raw, _, index = raw.partition("/")
        only = int(index)
    if raw == "random" or (not raw and long):
        seed = random.SystemRandom().randrange(10**9)
    else:
        seed = int(raw) if raw else 20_260_611
    runs = int(os.environ.get("CHAOS_RUNS", 0)) or (runs_ci * 10 if long else runs_ci)
    return Settings(runs=runs, max_kills=8 if long else 5, seed=seed, only=only, long=long)


def run_seed(suite_seed: int, index: int) -> int:
    """The seed of run ``index`` of a suite."""
    return random.Random(f"{suite_seed}/{index}").randrange(10**12)


def run_suite(
    store: str,
    fresh: Callable[[str], tuple[str, Path]],
    folder: Path,
    conf: Settings,
    workers: int = 2,
) -> list[RunOutcome]:
    """Every run of the suite, ``workers`` at a time, each worker with a fork server."""
    indexes = [conf.only] if conf.only is not None else list(range(conf.runs))
    local = threading.local()
    servers: list[ForkServer] = []
    lock = threading.Lock()

    def one(index: int) -> RunOutcome:
        if getattr(local, "server", None) is None:
            local.server = ForkServer(folder)
            with lock:
                servers.append(local.server)
        out = one_run(local.server, run_seed(conf.seed, index), fresh, conf.max_kills)
        out.violations = [f"run {conf.seed}/{index} {v}" for v in out.violations]
        return out

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(one, indexes))
    finally:
        for server in servers:
            server.close()
    TOTALS.runs[store] += len(outcomes)
    TOTALS.seconds[store] += round(time.monotonic() - started, 1)
    TOTALS.seeds[store] = str(conf.seed)
    for o in outcomes:
        TOTALS.kills[store] += sum(o.kills.values())
        TOTALS.kill_kinds.update(o.kills)
        TOTALS.checked[store] += o.checked
        TOTALS.violations[store] += len(o.violations)
        TOTALS.statuses.update(o.statuses)
        TOTALS.seen.update(o.seen)
        TOTALS.races.setdefault(store, Counter()).update(o.races)
    return outcomes
