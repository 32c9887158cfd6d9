"""Randomized, seeded fault injection: random runs, random SIGKILLs, resume until done, check.

Each run is generated from a seed (``make_plan``): a few batches of tool calls of every kind
the runtime has today, in random mixes:

| kind | tool | what |
|---|---|---|
| plain | ``lookup`` | no side effects |
| side | ``charge`` (keyed by order), ``archive`` (runs alone) | side effects, not replayable |
| replay | ``notify`` | side effects, replayable |
| confirm | ``refund`` | policy ``Confirm``; the host approves even amounts, rejects odd ones |
| await | ``bank`` | ``await_external``; the host settles it |
| input | ``pay`` | ``require_input``; the host answers, the body is re-entered |
| steer | ``escalate`` | ``Runtime.send`` while the run works; calls after it are cancelled |
| subagent | ``delegate_clerk`` | ``SubAgents``: a child run doing plain, side, replay calls |
| background | ``crunch`` | a recoverable background tool adopted past its foreground timeout |

``EXTRA_KINDS`` (sub-agent, background) are added to a plan from their own generator, so the
plans of the other kinds stay what they were for a seed. A delegation's task is its sub-plan
(JSON); the clerk's model (``sub_responder``) does it like the main model does the plan. A
background call's operation is external (its start, re-entries and recoveries are logged in
the effects file by task id) and ends only when the host releases it (``go_file``): the host
does so once the run rests, having answered "waiting" (``waiting_text``) after the call's
batch, so the notification's place in the context is the same in every run.

The model is a ``ScriptedModel`` whose every step is ``respond``, a pure function of the
request: after a kill the number of model calls differs, so a fixed list of responses cannot
be replayed; the plan can. It asks for the plan's batches in order; an interrupted call is
asked again (id + ``r``), a call that may or may not have taken effect is never repeated: the
model checks it with ``lookup`` (id + ``k``).

A child process (``random_child.py``) runs the plan on a real store, acting as the host too
(deciding, answering, settling whatever the run waits for, then resuming), and dies by SIGKILL
at a kill point the test process chose with the run's seeded random generator:

- ``sql:N``: the N-th SQL statement (SQLite trace callback; psycopg's statements, ``BEGIN``
  and ``COMMIT``): before or after a commit, or mid-transaction;
- ``write:N`` / ``wrote:N``: just before / just after the N-th store write method;
- ``tool:N``: right after the N-th tool body recorded its start;
- ``host:N``: just before the N-th host operation (``decide``, ``answer``, ``settle``,
  releasing a background operation);
- ``bg:N``: the N-th background event: a task store write (just before or after), an
  operation's start or recovery, an operation's first look at its release (in the foreground
  wait, or in a worker's attempt);
- ``after:S``: the fork server kills the child S seconds after forking it, wherever it is
  (between safe points, inside SQLite, in the middle of a model call...).

Fresh children resume the run, some killed again, until one completes it. Then ``check_run``
reads the store and the effects file and checks the invariants; every check is counted.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import chaoskit

import steadyrun as sr
from steadyrun.background import PostgresTaskStore, SqliteTaskStore, Task
from steadyrun.chat import ToolResultPart
from steadyrun.records import RunSnapshot
from steadyrun.stores import FeedMessage
from steadyrun.testing import ScriptedModel, call, text, tool_calls

RUN_ID = "random-run"
INPUT_ID = "random-input"
INPUT = "Handle the orders in the plan."
CHILD = Path(__file__).with_name("random_child.py")

KINDS = ("plain", "side", "replay", "confirm", "await", "input", "steer")
WEIGHTS = (2.0, 2.0, 1.5, 1.5, 1.0, 1.0)  # of the kinds but steer, in a normal batch
EXTRA_KINDS: tuple[str, ...] = ("subagent", "background")
"""Sub-agent and background calls: at most one of each per plan, with these chances."""
EXTRA_CHANCES = (0.5, 0.5)
DELEGATE = "delegate_clerk"
BACKGROUND = "crunch"
TASK_SUFFIX = "_t"
"""The PostgreSQL task store's schema is the run store's plus this (SQLite: ``tasks.db``)."""

# -- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanCall:
    """One call the model asks for: its kind, tool, arguments and provider call id."""

    kind: str
    name: str
    args: dict[str, Any]
    pid: str


def approves(cents: int) -> bool:
    """The host's rule for confirmations: even amounts are approved, odd ones rejected."""
    return cents % 2 == 0


def card_for(amount: int) -> str:
    """The host's answer to ``pay``'s input request."""
    return f"card-{amount}"


def wire_for(amount: int) -> str:
    """The host's result for an awaited ``bank`` call."""
    return f"wire {amount} done"


def steer_text(note: str) -> str:
    """The steering message ``escalate`` sends, by its id."""
    return f"Customer follow-up {note}: also check order Z."


def _call_of(kind: str, rng: random.Random, pid: str) -> PlanCall:
    order = rng.choice("ABCD")
    if kind == "plain":
        return PlanCall(kind, "lookup", {"order": order}, pid)
    if kind == "side":
        if rng.random() < 0.25:
            return PlanCall(kind, "archive", {"order": order}, pid)
        return PlanCall(kind, "charge", {"order": order, "cents": rng.randint(1, 999)}, pid)
    if kind == "replay":
        return PlanCall(kind, "notify", {"order": order}, pid)
    if kind == "confirm":
        return PlanCall(kind, "refund", {"order": order, "cents": rng.randint(1, 999)}, pid)
    if kind == "await":
        return PlanCall(kind, "bank", {"amount": rng.randint(1, 999)}, pid)
    if kind == "input":
        return PlanCall(kind, "pay", {"amount": rng.randint(1, 999)}, pid)
    if kind == "steer":
        return PlanCall(kind, "escalate", {"note": pid}, pid)
    if kind == "subagent":
        # The sub-plan: batches of plain, side and replay calls; the task (JSON) is written
        # once the call has its id (``make_plan``).
        sub = []
        for _ in range(rng.randint(1, 3)):
            kinds = rng.choices(("plain", "side", "replay"), weights=(1, 2, 1), k=rng.randint(1, 3))
            sub.append([[x.name, x.args] for x in (_call_of(k, rng, "") for k in kinds)])
        return PlanCall(kind, DELEGATE, {"task": json.dumps({"batches": sub})}, pid)
    if kind == "background":
        return PlanCall(kind, BACKGROUND, {"job": f"{order}{rng.randint(1, 999)}"}, pid)
    raise ValueError(kind)


def make_plan(seed: int) -> list[list[PlanCall]]:
    """The batches the model asks for, from ``seed`` alone."""
    rng = random.Random(seed)
    plan: list[list[PlanCall]] = []
    steers = 0
    for _ in range(rng.randint(3, 6)):
        batch: list[PlanCall] = []
        if steers < 2 and rng.random() < 0.25:
            # A steering batch: simple calls, the steering call (it runs alone, after them),
            # then maybe a lookup that never starts: the new input cancels it.
            steers += 1
            for _ in range(rng.randint(0, 2)):
                batch.append(_call_of(rng.choice(("plain", "side", "replay")), rng, ""))
            batch.append(_call_of("steer", rng, ""))
            if rng.random() < 0.6:
                batch.append(_call_of("plain", rng, ""))
        else:
            kinds = rng.choices(KINDS[:-1], weights=WEIGHTS, k=rng.randint(1, 4))
            batch = [_call_of(kind, rng, "") for kind in kinds]
        plan.append(batch)
    # The extra kinds, from their own generator: each in a batch without steering.
    extra = random.Random(seed * 104_729 + 3)
    plain = [batch for batch in plan if all(c.kind != "steer" for c in batch)]
    for kind, chance in zip(EXTRA_KINDS, EXTRA_CHANCES, strict=True):
        if plain and extra.random() < chance:
            batch = extra.choice(plain)
            batch.insert(extra.randint(0, len(batch)), _call_of(kind, extra, ""))
    for b, batch in enumerate(plan, start=1):
        batch[:] = [replace(c, pid=f"b{b}c{i}") for i, c in enumerate(batch, start=1)]
        for c in batch:
            if c.kind == "steer":
                c.args["note"] = c.pid
            if c.kind == "subagent":
                c.args["task"] = json.dumps({"task": c.pid, **json.loads(c.args["task"])})
    return plan


def sub_final(task: str) -> str:
    """The clerk's answer once its sub-plan is done (the delegation's result)."""
    return f"Subtask {task} done."


def waiting_text(task_ids: list[str]) -> str:
    """The model's answer while background tasks of a finished batch have not ended."""
    return "Waiting for background tasks: " + ", ".join(task_ids)


def notice_id(task_id: str) -> str:
    """The feed message id of a task's ending."""
    return f"task:{task_id}:ended"


def task_of_receipt(result: str | None) -> str | None:
    """The task id of a background launch receipt, or ``None``."""
    if not result or not result.startswith("{"):
        return None
    try:
        receipt = json.loads(result)
    except ValueError:
        return None
    return receipt.get("task_id") if isinstance(receipt, dict) else None


# -- the model ---------------------------------------------------------------------------------


def _outstanding(c: PlanCall, pid: str, results: dict[str, str]) -> list[Any]:
    answer = results.get(pid)
    if answer is None:
        return [call(c.name, c.args, id=pid)]
    if "safe to call it again" in answer or "changed nothing outside" in answer:
        return _outstanding(c, pid + "r", results)
    if "may or may not have taken effect" in answer or "outcome is unknown" in answer:
        check = PlanCall("plain", "lookup", {"order": c.args.get("order", "-"), "check": pid}, "")
        return _outstanding(check, pid + "k", results)
    return []  # a final answer: a result, an error, a rejection, a cancellation


def final_text(plan: list[list[PlanCall]], users: int) -> str:
    """The model's answer once every batch is done."""
    return f"All {len(plan)} batches handled, {users} user messages read."


def responder(plan: list[list[PlanCall]]) -> Callable[[sr.ModelRequest], sr.ModelResponse]:
    """The model: a pure function of the request, asking for the plan's batches in order."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        results = {
            p.call_id: p.content
            for m in request.messages
            if m.role == "tool"
            for p in m.parts
            if isinstance(p, ToolResultPart)
        }
        users = [m.text for m in request.messages if m.role == "user"]
        notes = {m.id for m in request.messages if m.role == "system" and m.id}
        for i, batch in enumerate(plan):
            todo = [x for c in batch for x in _outstanding(c, c.pid, results)]
            if not todo:
                waiting = [
                    task
                    for c in batch
                    if c.kind == "background"
                    and (task := task_of_receipt(results.get(c.pid))) is not None
                    and notice_id(task) not in notes
                ]
                if waiting:
                    return text(waiting_text(waiting))
                continue
            for c in plan[i - 1] if i else []:
                if c.kind == "steer" and steer_text(c.pid) not in users:
                    return text(f"the steering message {c.pid} never arrived")
            return tool_calls(*todo)
        return text(final_text(plan, len(users)))

    return respond


def scripted_model(plan: list[list[PlanCall]]) -> ScriptedModel:
    """A ``ScriptedModel`` whose every step is the plan's ``respond`` (see the docstring)."""
    return ScriptedModel([responder(plan)] * 400, name="random-plan")


def sub_responder(request: sr.ModelRequest) -> sr.ModelResponse:
    """The clerk's model: does the sub-plan of its task (the first user message) in order."""
    task = next(m.text for m in request.messages if m.role == "user")
    spec = json.loads(task)
    results = {
        p.call_id: p.content
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    for b, batch in enumerate(spec["batches"], start=1):
        calls = [
            PlanCall("sub", name, args, f"{spec['task']}s{b}c{i}")
            for i, (name, args) in enumerate(batch, start=1)
        ]
        todo = [x for c in calls for x in _outstanding(c, c.pid, results)]
        if todo:
            return tool_calls(*todo)
    return text(sub_final(spec["task"]))


def sub_model() -> ScriptedModel:
    """The clerk's ``ScriptedModel``."""
    return ScriptedModel([sub_responder] * 400, name="random-clerk")


# -- kill points -------------------------------------------------------------------------------

EVENT_KINDS = ("sql", "write", "wrote", "tool", "host", "bg")
KIND_WEIGHTS = (0.34, 0.13, 0.13, 0.1, 0.05, 0.25)
AFTER_WEIGHT = 0.25


def choose_kill(rng: random.Random, counts: dict[str, int], seconds: float, attempt: int) -> str:
    """A kill point for a child's ``attempt``-th try at the run (0: the first run).

    Event numbers and delays are drawn within what an uninterrupted run makes (``counts``,
    ``seconds``), shrinking with each attempt as less work is left.
    """
    shrink = 0.75**attempt
    kinds = [k for k in EVENT_KINDS if counts.get(k, 0) > 0]
    weights = [KIND_WEIGHTS[EVENT_KINDS.index(k)] for k in kinds]
    if rng.random() < AFTER_WEIGHT or not kinds:
        return f"after:{rng.uniform(0.0, seconds * shrink):.4f}"
    kind = rng.choices(kinds, weights=weights)[0]
    return f"{kind}:{rng.randint(1, max(1, round(counts[kind] * shrink)))}"


class KillSwitch:
    """Counts events by kind in the child and dies by SIGKILL at the chosen one."""

    def __init__(self, spec: str) -> None:
        kind, _, n = spec.partition(":")
        self.kind = kind if kind in EVENT_KINDS else ""
        self.at = int(n) if self.kind else 0
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def hit(self, kind: str, label: str = "") -> None:
        """One event of ``kind``; never returns when it is the chosen kill point."""
        with self._lock:
            self.counts[kind] += 1
            if kind == self.kind and self.counts[kind] == self.at:
                os.kill(os.getpid(), signal.SIGKILL)


def record_effect(path: Path, tool: str, call_id: str, phase: str) -> None:
    """Append ``<tool> <call id> <phase> <pid>`` to the effects file in one ``O_APPEND`` write.

    Not fsynced: SIGKILL ends the process, not the machine; the page cache keeps the line.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tool} {call_id} {phase} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def read_effects(path: Path) -> list[tuple[str, str, str]]:
    """``(tool, call id, phase)`` for every body start in the effects file."""
    if not path.exists():
        return []
    return [tuple(line.split()[:3]) for line in path.read_text().splitlines()]  # type: ignore[misc]


# -- the fork server ---------------------------------------------------------------------------


class ForkServer(chaoskit.ForkServer):
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

    @property
    def killed(self) -> bool:
        """Whether it died by SIGKILL."""
        return self.returncode == -signal.SIGKILL


def run_child(server: ForkServer, store: str, seed: int, kill: str, effects: Path) -> Child:
    """One child on ``store`` running the plan of ``seed``, killed at ``kill``."""
    argv = ["--store", store, "--seed", str(seed), "--kill-at", kill, "--effects", str(effects)]
    kill_after = float(kill.partition(":")[2]) if kill.startswith("after:") else None
    code, out, err = server.run(argv, kill_after=kill_after)
    lines = out.strip().splitlines()
    report = json.loads(lines[-1]) if code == 0 and lines else None
    return Child(code, report, err)


# -- reading the store -------------------------------------------------------------------------


@dataclass
class Observed:
    """What a store holds for the run, read by the test process.

    ``children``: the child runs of its delegations, by delegation call id; ``tasks``: its
    background tasks (read for the final observation only).
    """

    snapshot: RunSnapshot | None
    feed: list[FeedMessage]
    consumed: int
    children: dict[str, RunSnapshot] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)


def child_run(call_id: str) -> str:
    """The run id of the child run of delegation ``call_id``."""
    return f"{RUN_ID}/{call_id}"


async def _load_with_children(store: Any) -> tuple[RunSnapshot | None, dict[str, RunSnapshot]]:
    snapshot = await store.load(RUN_ID)
    children = {}
    for c in snapshot.calls if snapshot else []:
        if c.name == DELEGATE:
            child = await store.load(child_run(c.id))
            if child is not None:
                children[c.id] = child
    return snapshot, children


def task_store_of(spec: str) -> Any:
    """The background task store beside the run store a ``--store`` spec names."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SqliteTaskStore(Path(where).with_name("tasks.db"))
    schema, _, dsn = where.partition("|")
    return PostgresTaskStore(dsn, schema=schema + TASK_SUFFIX, max_size=2)


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

        async def load_sqlite() -> tuple[RunSnapshot | None, dict[str, RunSnapshot]]:
            async with sr.SqliteStore(where) as store:
                return await _load_with_children(store)

        snapshot, children = asyncio.run(load_sqlite())
        conn = sqlite3.connect(where)
        try:
            rows = conn.execute("SELECT message FROM feed WHERE run_id = ? ORDER BY seq", (RUN_ID,))
            feed = [decode(row[0], FeedMessage) for row in rows]
            got = conn.execute("SELECT consumed FROM feed_state WHERE run_id = ?", (RUN_ID,))
            row = got.fetchone()
        finally:
            conn.close()
        return Observed(snapshot, feed, row[0] if row else 0, children, found_tasks)
    import psycopg

    from steadyrun.stores._postgres import PostgresStore

    schema, _, dsn = where.partition("|")

    async def load_pg() -> tuple[RunSnapshot | None, dict[str, RunSnapshot]]:
        async with PostgresStore(dsn, schema=schema, min_size=0, max_size=1) as store:
            return await _load_with_children(store)

    snapshot, children = asyncio.run(load_pg())
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
    return Observed(snapshot, feed, consumed, children, found_tasks)


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


def one_run(
    server: ForkServer,
    seed: int,
    fresh: Callable[[str], tuple[str, Path]],
    max_kills: int,
) -> RunOutcome:
    """The run of ``seed``: an uninterrupted baseline, then kills and resumes, then checks."""
    outcome = RunOutcome(seed)
    from randomcheck import Checker, check_run

    ck = Checker(f"seed {seed}")
    try:
        plan = make_plan(seed)
        spec, effects = fresh(f"base-{seed}")
        straight = run_child(server, spec, seed, "0", effects)
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
            child = run_child(server, spec, seed, kill, effects)
            if child.killed:
                outcome.kills[kill.partition(":")[0]] += 1
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
class Totals:
    """Counts for the session summary, per store."""

    runs: Counter[str] = field(default_factory=Counter)
    kills: Counter[str] = field(default_factory=Counter)
    kill_kinds: Counter[str] = field(default_factory=Counter)
    checked: Counter[str] = field(default_factory=Counter)
    violations: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    seen: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    seeds: dict[str, str] = field(default_factory=dict)


TOTALS = Totals()
"""Filled by ``run_suite``; ``conftest.pytest_terminal_summary`` prints it."""


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
    return outcomes


def summary_line(store: str) -> str:
    """One line of counts for ``store`` (or ``all``)."""
    stores = list(TOTALS.runs) if store == "all" else [store]
    runs = sum(TOTALS.runs[s] for s in stores)
    kills = sum(TOTALS.kills[s] for s in stores)
    checked = sum(TOTALS.checked[s] for s in stores)
    bad = sum(TOTALS.violations[s] for s in stores)
    seeds = ", ".join(f"{s} {TOTALS.seeds[s]}" for s in stores)
    return (
        f"chaos random {store}: {runs} runs, {kills} kills, {checked} invariants checked, "
        f"{bad} violations (CHAOS_SEED: {seeds})"
    )
