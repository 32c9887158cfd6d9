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

Sub-agents and background tools do not exist yet: ``EXTRA_KINDS`` is the hook where they go
(a kind, its tool in ``random_child.build_agent``, its host action in ``host_acts`` and its
invariant in ``check_run``).

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
- ``host:N``: just before the N-th host operation (``decide``, ``answer``, ``settle``);
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
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.chat import Message, ToolResultPart, dumps
from steadyrun.records import CallRecord, RunSnapshot, merge_call
from steadyrun.records._call import ACTIVE_STATUSES
from steadyrun.stores import FeedMessage
from steadyrun.testing import ScriptedModel, call, text, tool_calls

RUN_ID = "random-run"
INPUT_ID = "random-input"
INPUT = "Handle the orders in the plan."
CHILD = Path(__file__).with_name("random_child.py")

KINDS = ("plain", "side", "replay", "confirm", "await", "input", "steer")
WEIGHTS = (2.0, 2.0, 1.5, 1.5, 1.0, 1.0)  # of the kinds but steer, in a normal batch
EXTRA_KINDS: tuple[str, ...] = ()
"""HOOK: sub-agent and background calls, once steadyrun has them (see the module docstring)."""

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
    raise ValueError(kind)  # EXTRA_KINDS go here


def make_plan(seed: int) -> list[list[PlanCall]]:
    """The batches the model asks for, from ``seed`` alone."""
    rng = random.Random(seed)
    plan: list[list[PlanCall]] = []
    steers = 0
    for b in range(1, rng.randint(3, 6) + 1):
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
        plan.append([replace(c, pid=f"b{b}c{i}") for i, c in enumerate(batch, start=1)])
        for c in plan[-1]:
            if c.kind == "steer":
                c.args["note"] = c.pid
    return plan


# -- the model ---------------------------------------------------------------------------------


def _outstanding(c: PlanCall, pid: str, results: dict[str, str]) -> list[Any]:
    answer = results.get(pid)
    if answer is None:
        return [call(c.name, c.args, id=pid)]
    if "safe to call it again" in answer or "changed nothing outside" in answer:
        return _outstanding(c, pid + "r", results)
    if "may or may not have taken effect" in answer:
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
        for i, batch in enumerate(plan):
            todo = [x for c in batch for x in _outstanding(c, c.pid, results)]
            if not todo:
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


# -- kill points -------------------------------------------------------------------------------

EVENT_KINDS = ("sql", "write", "wrote", "tool", "host")
KIND_WEIGHTS = (0.34, 0.13, 0.13, 0.1, 0.05)
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


class ForkServer:
    """``random_child.py --serve``: forks each child from a process that imported everything.

    A request may carry ``kill_after`` (seconds): the server kills the child with SIGKILL that
    long after forking it, unless it exited first (it waits on a pidfd, without threads).
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._n = 0
        self._buf = b""
        self._proc = subprocess.Popen(
            [sys.executable, str(CHILD), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )

    def _answer(self, timeout: float) -> dict[str, Any] | None:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the fork server exited with {self._proc.wait()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, argv: list[str], kill_after: float | None, timeout: float = 120
    ) -> tuple[int, str, str]:
        """Run one child; its return code, stdout and stderr."""
        assert self._proc.stdin is not None
        self._n += 1
        out = self._folder / f"child-{id(self)}-{self._n}.out"
        request = {"argv": argv, "out": str(out), "kill_after": kill_after}
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        started = self._answer(30)
        if started is None:
            raise TimeoutError("the fork server does not answer")
        ended = self._answer(timeout)
        if ended is None:
            os.kill(started["pid"], signal.SIGKILL)
            self._answer(30)
            raise TimeoutError(f"child {argv} did not finish in {timeout}s")
        texts = []
        for path in (out, Path(str(out) + ".err")):  # missing if killed right after the fork
            texts.append(path.read_text() if path.exists() else "")
            path.unlink(missing_ok=True)
        return ended["returncode"], texts[0], texts[1]

    def close(self) -> None:
        """Stop the server."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)


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
    code, out, err = server.run(argv, kill_after)
    lines = out.strip().splitlines()
    report = json.loads(lines[-1]) if code == 0 and lines else None
    return Child(code, report, err)


# -- reading the store -------------------------------------------------------------------------


@dataclass
class Observed:
    """What a store holds for the run, read by the test process."""

    snapshot: RunSnapshot | None
    feed: list[FeedMessage]
    consumed: int


def observe(spec: str) -> Observed:
    """Read the run, its feed and how far it was consumed, as a new process would."""
    from steadyrun._codec import decode

    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        import sqlite3

        async def load_sqlite() -> RunSnapshot | None:
            async with sr.SqliteStore(where) as store:
                return await store.load(RUN_ID)

        snapshot = asyncio.run(load_sqlite())
        conn = sqlite3.connect(where)
        try:
            rows = conn.execute("SELECT message FROM feed WHERE run_id = ? ORDER BY seq", (RUN_ID,))
            feed = [decode(row[0], FeedMessage) for row in rows]
            got = conn.execute("SELECT consumed FROM feed_state WHERE run_id = ?", (RUN_ID,))
            row = got.fetchone()
        finally:
            conn.close()
        return Observed(snapshot, feed, row[0] if row else 0)
    import psycopg

    from steadyrun.stores._postgres import PostgresStore

    schema, _, dsn = where.partition("|")

    async def load_pg() -> RunSnapshot | None:
        async with PostgresStore(dsn, schema=schema, min_size=0, max_size=1) as store:
            return await store.load(RUN_ID)

    snapshot = asyncio.run(load_pg())
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
    return Observed(snapshot, feed, consumed)


# -- the checks --------------------------------------------------------------------------------


@dataclass
class Checker:
    """Counts checks; collects violations instead of stopping at the first."""

    label: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> bool:
        """One invariant check; ``what`` describes the violation."""
        self.checked += 1
        if not ok:
            self.violations.append(f"{self.label}: {what}")
        return ok


def _by_traits(c: CallRecord) -> str:
    return "needs_review" if c.side_effects and not c.replayable else "interrupted"


def _unknown_results(messages: Iterable[Message], unknown_ids: set[str]) -> int | None:
    """Index of the first tool message carrying a result of a call in ``unknown_ids``."""
    for i, m in enumerate(messages):
        if m.role == "tool" and any(
            isinstance(p, ToolResultPart) and p.call_id in unknown_ids for p in m.parts
        ):
            return i
    return None


def check_run(
    ck: Checker,
    plan: list[list[PlanCall]],
    baseline: dict[str, Any],
    killed: list[Observed],
    final: Observed,
    effects: list[tuple[str, str, str]],
) -> Counter[str]:
    """Every invariant of one run; returns the final call statuses."""
    snap = final.snapshot
    if not ck.check(snap is not None, "the run is not in the store"):
        return Counter()
    assert snap is not None
    # (1) the run completed with the uninterrupted run's answer; its context log is whole
    ck.check(snap.run.status == "completed", f"run ended {snap.run.status}: {snap.run.error}")
    ck.check(snap.run.text == baseline["text"], f"text {snap.run.text!r} != {baseline['text']!r}")
    ck.check(
        len(snap.context) == snap.checkpoint.context_length,
        f"context log {len(snap.context)} long, checkpoint {snap.checkpoint.context_length}",
    )
    calls = {c.id: c for c in snap.calls}
    statuses = Counter(c.status for c in snap.calls)

    # (2) no claimed input lost: every input the plan sends, and everything in the feed, is in
    # the context exactly once; the feed is consumed to its end
    keys = Counter(f"{m.id}@{m.revision}" for m in snap.context if m.role in ("user", "system"))
    ids = Counter(m.id for m in snap.context if m.role in ("user", "system"))
    sent = [INPUT_ID] + [c.pid for batch in plan for c in batch if c.kind == "steer"]
    for input_id in sent:
        ck.check(ids[input_id] == 1, f"input {input_id} is {ids[input_id]} times in the context")
    for m in final.feed:
        ck.check(keys[m.key] == 1, f"feed message {m.key} is {keys[m.key]} times in the context")
    ck.check(sum(keys.values()) == len(final.feed), "the context has input the feed never had")
    ck.check(sorted(m.id for m in final.feed) == sorted(sent), f"feed {final.feed}")
    last = max((m.seq for m in final.feed), default=0)
    ck.check(final.consumed == last, f"input consumed through {final.consumed} of {last}")

    # (3) no tool body started twice for one call (phase: a body asking for input, then the
    # same call re-entered with the answer); every body that ran belongs to a stored call
    ran = Counter((call_id, phase) for _, call_id, phase in effects)
    for (call_id, phase), n in ran.items():
        ck.check(n == 1, f"the body of {call_id} ({phase}) started {n} times")
        ck.check(call_id in calls, f"the body of {call_id} ran but the store has no such call")
    for tool, call_id, _ in effects:
        if call_id in calls:
            ck.check(calls[call_id].name == tool, f"{call_id} ran {tool}, record says other")
    body = Counter(call_id for _, call_id, phase in effects if phase in ("run", "ask"))
    run_phase = Counter(call_id for _, call_id, phase in effects if phase == "run")

    # (4) approvals: each confirmation decided by the host's rule; an approved call ran exactly
    # once (or, its start recorded and then cut off, at most once and needs review); a rejected
    # call never ran
    for c in snap.calls:
        if c.name != "refund":
            continue
        cents = json.loads(c.arguments)["cents"]
        if not ck.check(c.decision is not None, f"{c.id} has no decision ({c.status})"):
            continue
        assert c.decision is not None
        ck.check(c.decision.approve == approves(cents), f"{c.id} decided {c.decision}")
        if c.decision.approve:
            if c.status == "succeeded":
                ck.check(run_phase[c.id] == 1, f"approved {c.id} ran {run_phase[c.id]} times")
            else:
                ck.check(c.status == "needs_review", f"approved {c.id} ended {c.status}")
                ck.check(run_phase[c.id] <= 1, f"approved {c.id} ran {run_phase[c.id]} times")
        else:
            ck.check(c.status == "rejected", f"rejected {c.id} ended {c.status}")
            ck.check(body[c.id] == 0, f"rejected {c.id} ran {body[c.id]} times")
    # Host answers reached their calls.
    for c in snap.calls:
        if c.name in ("bank", "pay") and c.status == "succeeded":
            amount = json.loads(c.arguments)["amount"]
            paid = f"paid {amount} with {card_for(amount)}"
            want = wire_for(amount) if c.name == "bank" else paid
            ck.check(c.result == want, f"{c.id} ({c.name}) result {c.result!r}, want {want!r}")
        if c.status in ("cancelled", "rejected"):
            ck.check(run_phase[c.id] == 0, f"{c.id} is {c.status} but its body ran")

    # (5) merge rules: nothing left active; across the snapshots taken at each kill and the
    # final one, revs never go back, a settled outcome never changes, a decision stays; an
    # older snapshot merged over the final record changes nothing, and a newer one cannot
    # change a settled outcome
    cut_off: set[str] = set()
    history: dict[str, list[CallRecord]] = {}
    for o in killed:
        for c in o.snapshot.calls if o.snapshot else []:
            history.setdefault(c.id, []).append(c)
            if c.status == "running" and not c.handover:
                cut_off.add(c.id)
    for c in snap.calls:
        ck.check(c.status not in ACTIVE_STATUSES, f"{c.id} ({c.name}) left {c.status}")
        seen = [*history.get(c.id, []), c]
        for before, after in zip(seen, seen[1:], strict=False):
            ck.check(after.rev >= before.rev, f"{c.id} rev went {before.rev} -> {after.rev}")
            if before.settled:
                same = (before.status, before.result, before.error)
                ck.check(
                    same == (after.status, after.result, after.error),
                    f"{c.id} settled {before.status} then became {after.status}",
                )
            if before.decision is not None:
                ck.check(after.decision == before.decision, f"{c.id} decision changed")
        for older in seen[:-1]:
            ck.check(merge_call(c, older) == c, f"an older snapshot of {c.id} changed it")
        newer = replace(c, rev=c.rev + 1, status="running", result=None, error="late write")
        merged = merge_call(c, newer)
        ck.check(
            (merged.status, merged.result, merged.error) == (c.status, c.result, c.error),
            f"a newer runtime snapshot changed the settled outcome of {c.id}",
        )
        # (6) a call cut off while running is settled by its traits; nothing else is unknown
        if c.id in cut_off:
            ck.check(c.status == _by_traits(c), f"{c.id} cut off, ended {c.status}")
        else:
            ck.check(
                c.status not in ("interrupted", "needs_review"),
                f"{c.id} ({c.name}) is {c.status} but was never cut off",
            )

    # (7) the context equals the uninterrupted run's wherever nothing was unknown: all of it
    # when no call was cut off, else up to the first result of a call that was
    context = json.loads(dumps(snap.context, list[Message]))["data"]
    base = json.loads(baseline["messages"])["data"]
    unknown = {
        c.provider_call_id for c in snap.calls if c.status in ("interrupted", "needs_review")
    }
    if not unknown:
        ck.check(context == base, "the context differs from the uninterrupted run's")
        got = [[c.id, c.name, c.status] for c in snap.calls]
        ck.check(got == baseline["calls"], f"calls {got} != {baseline['calls']}")
    else:
        cut = _unknown_results(snap.context, unknown)
        n = len(snap.context) if cut is None else cut
        ck.check(context[:n] == base[:n], f"the context's first {n} messages differ from baseline")
    return statuses


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


def one_run(
    server: ForkServer,
    seed: int,
    fresh: Callable[[str], tuple[str, Path]],
    max_kills: int,
) -> RunOutcome:
    """The run of ``seed``: an uninterrupted baseline, then kills and resumes, then checks."""
    outcome = RunOutcome(seed)
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
        final = observe(spec)
        outcome.statuses = check_run(ck, plan, baseline, killed, final, read_effects(effects))
    except _Stop:
        pass
    except Exception as exc:  # collected: every failing seed is reported at once
        ck.check(False, f"{type(exc).__name__}: {exc}")
    outcome.checked = ck.checked
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
