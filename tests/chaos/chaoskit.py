"""Shared by the crash tests and their child process: the workload, kill points, the checks.

The child process (``crash_child.py``) runs a deterministic agent on a real store and kills
itself with SIGKILL at a counted kill point. The test process then resumes the run in fresh
children and checks the invariants of recovery (``verify``) against an uninterrupted run of
the same workload (``crash_test``).

Kill points are named ``<kind>:<n>``: the n-th event of that kind in the process; ``0`` never
kills. ``sql`` events are the statements the store sends (and, on PostgreSQL, the ``BEGIN``
and ``COMMIT`` of each transaction block), so a kill lands before or after a commit or between
a transaction's statements; ``tool`` events come right after a tool body made its side effect
(it wrote its line to the effects file) and before it returns.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.chat import Message, ToolResultPart, dumps, loads
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.stores import FeedMessage
from steadyrun.testing import FunctionModel, call, text, tool_calls

RUN_ID = "chaos-run"
INPUT_ID = "order-input"
INPUT = "Charge order A, tell the customer, archive it."
STEER_ID = "steer-1"
STEER = "Also charge orders B and C, and archive B."
CHILD = Path(__file__).with_name("crash_child.py")

# -- kill points ---------------------------------------------------------------------------


class KillSwitch:
    """Counts events by kind and kills the process with SIGKILL at the chosen one.

    Args:
        spec: ``"<kind>:<n>"`` (die at the n-th event of that kind, counted from 1) or ``"0"``.
    """

    def __init__(self, spec: str) -> None:
        kind, _, n = spec.partition(":")
        self.kind = kind if n else ""
        self.at = int(n) if n else 0
        self.counts: Counter[str] = Counter()
        self.labels: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def hit(self, kind: str, label: str = "") -> None:
        """One event of ``kind``; never returns when it is the chosen kill point."""
        with self._lock:
            self.counts[kind] += 1
            self.labels.setdefault(kind, []).append(label)
            if kind == self.kind and self.counts[kind] == self.at:
                os.kill(os.getpid(), signal.SIGKILL)


# -- the workload ----------------------------------------------------------------------------

# Each step is one batch the model asks for; a step is done when every call in it has a
# final answer. An interrupted call is asked again (id + "r"); a call whose outcome is unknown
# (needs_review) is never repeated: the model checks it with ``lookup`` instead (id + "k").
PlanCall = tuple[str, dict[str, Any], str]
PLAN: list[list[PlanCall]] = [
    [
        ("charge", {"order": "A", "cents": 500}, "p1a"),
        ("notify", {"order": "A"}, "p1b"),
        ("lookup", {"order": "A"}, "p1c"),
    ],
    [("archive", {"order": "A"}, "p2a")],
    # escalate runs alone and puts the steering message in the feed while the run works: the
    # lookup queued behind it is cancelled (input superseded it); the message enters the
    # context when the batch settles.
    [("escalate", {"note": "customer wants B and C"}, "p3a"), ("lookup", {"order": "B"}, "p3b")],
    [
        ("charge", {"order": "B", "cents": 700}, "p4a"),
        ("charge", {"order": "C", "cents": 900}, "p4b"),
        ("notify", {"order": "B"}, "p4c"),
        ("lookup", {"order": "C"}, "p4d"),
    ],
    [("archive", {"order": "B"}, "p5a"), ("notify", {"order": "C"}, "p5b")],
]
STEER_STEP = 3  # PLAN[3] answers the steering message


def _outstanding(name: str, args: dict[str, Any], pid: str, results: dict[str, str]) -> list:
    answer = results.get(pid)
    if answer is None:
        return [(name, args, pid)]
    if "safe to call it again" in answer or "changed nothing outside" in answer:
        return _outstanding(name, args, pid + "r", results)
    if "may or may not have taken effect" in answer:
        return _outstanding(
            "lookup", {"order": args.get("order", "?"), "check": pid}, pid + "k", results
        )
    return []


def respond(request: sr.ModelRequest) -> sr.ModelResponse:
    """The model: a pure function of the request."""
    results = {
        p.call_id: p.content
        for m in request.messages
        if m.role == "tool"
        for p in m.parts
        if isinstance(p, ToolResultPart)
    }
    users = [m.text for m in request.messages if m.role == "user"]
    for i, step in enumerate(PLAN):
        todo = [c for name, args, pid in step for c in _outstanding(name, args, pid, results)]
        if not todo:
            continue
        if i == STEER_STEP and STEER not in users:
            return text("the steering message never arrived")
        return tool_calls(*(call(name, args, id=pid) for name, args, pid in todo))
    return text(f"All orders handled for {len(users)} user messages.")


def record_effect(path: Path, tool: str, call_id: str, key: str) -> None:
    """Append ``<tool> <call id> <args key> <pid>`` to the effects file, durably."""
    line = f"{tool} {call_id} {key} {os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def build_agent(runtime: sr.Runtime, effects: Path, switch: KillSwitch) -> sr.Agent:
    """The crash workload's agent; every tool body records that it ran in ``effects``."""

    def effect(ctx: sr.ToolContext, key: str) -> None:
        record_effect(effects, ctx.tool_name, ctx.call_id, key)
        switch.hit("tool", f"{ctx.tool_name} {ctx.call_id}")

    @sr.tool(side_effects=True, concurrency_key=lambda a: a["order"])
    async def charge(order: str, cents: int, ctx: sr.ToolContext) -> str:
        """Charge an order (side effects, not replayable).

        Args:
            order: The order.
            cents: The amount.
        """
        effect(ctx, f"{order}/{cents}")
        return f"charged {order} {cents}"

    @sr.tool(side_effects=True, replayable=True, concurrency_key="")
    async def notify(order: str, ctx: sr.ToolContext) -> str:
        """Tell the customer (side effects, safe to repeat).

        Args:
            order: The order.
        """
        effect(ctx, order)
        return f"notified {order}"

    @sr.tool(side_effects=False, concurrency_key="")
    async def lookup(order: str, ctx: sr.ToolContext, check: str = "") -> str:
        """Read an order (no side effects).

        Args:
            order: The order.
            check: A call whose effect to check.
        """
        effect(ctx, f"{order}/{check}")
        return f"order {order} ok" + (f", checked {check}" if check else "")

    @sr.tool(side_effects=True)
    async def archive(order: str, ctx: sr.ToolContext) -> str:
        """Archive an order (runs alone; side effects, not replayable).

        Args:
            order: The order.
        """
        effect(ctx, order)
        return f"archived {order}"

    @sr.tool(side_effects=True, replayable=True)
    async def escalate(note: str, ctx: sr.ToolContext) -> str:
        """Forward the customer's next request to the run (runs alone; safe to repeat).

        Args:
            note: Why.
        """
        await runtime.send(ctx.run_id, STEER, id=STEER_ID)
        effect(ctx, "steer")
        return f"escalated: {note}"

    return sr.Agent(
        name="chaos",
        model=FunctionModel(respond),
        tools=[charge, notify, lookup, archive, escalate],
        limits=sr.Limits(max_iterations=40, max_concurrent_tool_calls=3),
    )


async def drive(store: Any, mode: str, switch: KillSwitch, effects: Path) -> dict[str, Any]:
    """Run (``run``) or resume (``resume``) the workload on ``store``; the child's report."""
    runtime = sr.Runtime(store)
    agent = build_agent(runtime, effects, switch)
    if mode == "resume" and await store.load(RUN_ID) is not None:
        result = await runtime.resume(RUN_ID, agent=agent)
    else:
        # A run killed before its first step has input but no record: a host retries the
        # start, and the same input id keeps the input from entering twice.
        result = await runtime.run(agent, run_id=RUN_ID, input=INPUT, input_id=INPUT_ID)
    return {
        "status": result.status,
        "text": result.text,
        "calls": [[c.id, c.name, c.status] for c in result.calls],
        "messages": dumps(result.messages, list[Message]).decode(),
        "counts": dict(switch.counts),
        "labels": switch.labels,
        "pid": os.getpid(),
    }


# -- the test side -----------------------------------------------------------------------------


@dataclass
class Child:
    """A finished child process."""

    returncode: int
    report: dict[str, Any] | None
    stderr: str

    @property
    def killed(self) -> bool:
        """Whether it died by SIGKILL."""
        return self.returncode == -signal.SIGKILL


class ForkServer:
    """``<child> --serve``: forks each child from a process that imported everything.

    A child process is mostly start-up cost (imports); forked children skip it. Each is still
    a process of its own: it opens the store itself, and SIGKILL ends it for real. A request
    may carry ``kill_after`` (seconds), for servers that kill their child that long after
    forking it (``random_child.py``).
    """

    def __init__(self, folder: Path, child: Path = CHILD) -> None:
        self._folder = folder
        self._n = 0
        self._buf = b""
        self._proc = subprocess.Popen(
            [sys.executable, str(child), "--serve"],
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
        self, argv: list[str], timeout: float = 120, kill_after: float | None = None
    ) -> tuple[int, str, str]:
        """Run one child; its return code, stdout and stderr."""
        assert self._proc.stdin is not None
        self._n += 1
        out = self._folder / f"child-{id(self)}-{self._n}.out"
        request: dict[str, Any] = {"argv": argv, "out": str(out)}
        if kill_after is not None:
            request["kill_after"] = kill_after
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        started = self._answer(30)
        if started is None:
            raise TimeoutError("the fork server does not answer")
        ended = self._answer(timeout)
        if ended is None:
            os.kill(started["pid"], signal.SIGKILL)  # the hung child; the server answers for it
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


_local = threading.local()


def run_child(store: str, mode: str, kill_at: str, effects: Path, timeout: float = 120) -> Child:
    """Run ``crash_child.py`` and collect its report (the last line of its stdout).

    Through this thread's ``ForkServer`` when it has one, else as a new interpreter.
    """
    argv = ["--store", store, "--mode", mode, "--kill-at", kill_at, "--effects", str(effects)]
    server: ForkServer | None = getattr(_local, "server", None)
    if server is not None:
        code, out, err = server.run(argv, timeout)
    else:
        proc = subprocess.run(
            [sys.executable, str(CHILD), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    report = None
    lines = out.strip().splitlines()
    if code == 0 and lines:
        report = json.loads(lines[-1])
    return Child(code, report, err)


@dataclass
class Observed:
    """What a store holds for the run, read by the test process."""

    snapshot: RunSnapshot | None
    feed: list[FeedMessage]
    consumed: int


@dataclass
class Outcome:
    """One kill scenario, checked."""

    point: str
    killed: int = 0  # how many kills actually happened (0, 1 or 2)
    statuses: Counter[str] = field(default_factory=Counter)
    error: str | None = None


ACTIVE = {"queued", "running", "waiting", "awaiting_decision", "awaiting_input"}


def read_effects(path: Path) -> list[tuple[str, str]]:
    """``(tool, call id)`` for every line of the effects file."""
    if not path.exists():
        return []
    return [tuple(line.split()[:2]) for line in path.read_text().splitlines()]  # type: ignore[misc]


def _by_traits(call: CallRecord) -> str:
    return "needs_review" if call.side_effects and not call.replayable else "interrupted"


def verify(
    baseline: dict[str, Any],
    killed: Sequence[Observed],
    final: Observed,
    effects: list[tuple[str, str]],
    resumed: dict[str, Any],
) -> Counter[str]:
    """Check every invariant of one scenario; returns the final call statuses."""
    snap = final.snapshot
    assert snap is not None, "the resumed run is not in the store"
    # (1) the run completed with the uninterrupted run's answer
    assert snap.run.status == "completed", f"run ended {snap.run.status}: {snap.run.error}"
    assert snap.run.text == baseline["text"], f"final text {snap.run.text!r}"
    assert resumed["text"] == baseline["text"]
    assert dumps(snap.context, list[Message]).decode() == resumed["messages"], (
        "the stored context differs from what the resumed run returned"
    )
    calls = {c.id: c for c in snap.calls}
    ran = Counter(call_id for _, call_id in effects)
    # every call started before some kill and unsettled at that kill
    started_unsettled = {
        c.id
        for o in killed
        if o.snapshot is not None
        for c in o.snapshot.calls
        if c.status == "running"
    }
    for call_id, n in ran.items():
        # (2) no tool body ran twice for one call; a body that ran belongs to a recorded call
        assert n == 1, f"the body of {call_id} ran {n} times"
        assert call_id in calls, f"the body of {call_id} ran but the store has no such call"
    for c in snap.calls:
        # (3) nothing left unsettled; every unsettled started call settled by its traits
        assert c.status not in ACTIVE, f"{c.id} ({c.name}) left {c.status}"
        if c.id in started_unsettled:
            assert c.status == _by_traits(c), (
                f"{c.id} ({c.name}) started before a kill and unsettled, ended {c.status}, "
                f"expected {_by_traits(c)}"
            )
        elif c.status in ("interrupted", "needs_review"):
            raise AssertionError(f"{c.id} ({c.name}) is {c.status} but was never cut off")
        if c.status == "succeeded":
            assert ran[c.id] == 1, f"{c.id} ({c.name}) succeeded without its body running"
        elif c.id in ran:
            assert c.status == _by_traits(c), f"{c.id} ({c.name}) body ran, record {c.status}"
    # (4) no claimed input lost, none entered twice, all of it delivered
    keys = Counter(f"{m.id}@{m.revision}" for m in snap.context if m.role in ("user", "system"))
    for m in final.feed:
        assert keys[m.key] == 1, f"input {m.key} is {keys[m.key]} times in the context"
    assert sum(keys.values()) == len(final.feed), "the context has input the feed never had"
    assert [m.id for m in final.feed] == [INPUT_ID, STEER_ID], [m.key for m in final.feed]
    last = max(m.seq for m in final.feed)
    assert final.consumed == last, f"input consumed through {final.consumed} of {last}"
    statuses = Counter(c.status for c in snap.calls)
    # (5) where nothing was unknown, the context is the uninterrupted run's, message for message
    if not statuses["interrupted"] and not statuses["needs_review"]:
        assert resumed["messages"] == baseline["messages"], "the context differs from baseline"
        assert [[c.id, c.name, c.status] for c in snap.calls] == baseline["calls"]
    else:
        ctx = loads(resumed["messages"], list[Message])
        assert ctx[0] == loads(baseline["messages"], list[Message])[0]
    return statuses


QUOTAS = {
    "before a commit": 16,
    "right after a commit": 16,
    "mid-transaction": 20,
    "between transactions": 8,
}
"""How many statements of each place ``choose_points`` picks (60 in all)."""


def choose_points(labels: list[str]) -> list[int]:
    """Statement numbers to kill at, spread evenly over the run within each place.

    ``labels`` are the baseline's statements in order; ``where`` tells each one's place. A kill
    at a ``COMMIT`` dies before the commit, at the statement after it after the commit, and
    between a ``BEGIN`` and its ``COMMIT`` mid-transaction.
    """
    places: dict[str, list[int]] = {}
    for k in range(1, len(labels) + 1):
        places.setdefault(where(labels, k), []).append(k)
    chosen: set[int] = set()
    for place, quota in QUOTAS.items():
        found = places.get(place, [])
        step = max(len(found) / quota, 1)
        chosen.update(found[int(i * step)] for i in range(min(quota, len(found))))
    return sorted(chosen)


def where(labels: list[str], k: int) -> str:
    """Where statement ``k`` (from 1) of the baseline stands relative to its transactions.

    Approximate where transactions overlap (PostgreSQL runs concurrent calls' saves on
    connections of their own); exact for SQLite's one connection.
    """
    if not 1 <= k <= len(labels):
        return "past the end"
    inside = False
    for label in labels[: k - 1]:
        word = label.upper()
        if word.startswith("BEGIN"):
            inside = True
        elif word.startswith(("COMMIT", "ROLLBACK")):
            inside = False
    word = labels[k - 1].upper()
    if word.startswith("COMMIT"):
        return "before a commit"
    if k > 1 and labels[k - 2].upper().startswith("COMMIT"):
        return "right after a commit"
    return "mid-transaction" if inside and not word.startswith("BEGIN") else "between transactions"


def scenario(
    point: str,
    again: str | None,
    fresh: Callable[[str], tuple[str, Path]],
    observe: Callable[[str], Observed],
    baseline: dict[str, Any],
) -> Outcome:
    """Kill a run at ``point`` (and its first resume at ``again``), resume it, check it."""
    outcome = Outcome(point=point if again is None else f"{point} then {again}")
    try:
        store, effects = fresh(point.replace(":", "-") + ("-" + again if again else ""))
        first = run_child(store, "run", point, effects)
        killed: list[Observed] = []
        if first.killed:
            outcome.killed += 1
            killed.append(observe(store))
        else:
            assert first.returncode == 0, f"run exited {first.returncode}: {first.stderr}"
            assert first.report is not None and first.report["text"] == baseline["text"]
        if again is not None:
            second = run_child(store, "resume", again, effects)
            if second.killed:
                outcome.killed += 1
                killed.append(observe(store))
            else:
                assert second.returncode == 0, f"resume exited {second.returncode}: {second.stderr}"
        last = run_child(store, "resume", "0", effects)
        assert last.returncode == 0 and last.report, (
            f"resume exited {last.returncode}: {last.stderr}"
        )
        outcome.statuses = verify(
            baseline, killed, observe(store), read_effects(effects), last.report
        )
    except Exception as exc:  # collected: every failing point is reported at once
        outcome.error = f"{type(exc).__name__}: {exc}"
    return outcome


def run_all(
    points: list[tuple[str, str | None]],
    fresh: Callable[[str], tuple[str, Path]],
    observe: Callable[[str], Observed],
    baseline: dict[str, Any],
    folder: Path,
    workers: int | None = None,
) -> list[Outcome]:
    """Every scenario, a few at a time, each worker thread with a fork server of its own."""
    workers = workers or max(2, min(4, os.cpu_count() or 2))
    servers: list[ForkServer] = []
    lock = threading.Lock()

    def one(point: tuple[str, str | None]) -> Outcome:
        if getattr(_local, "server", None) is None:
            _local.server = ForkServer(folder)
            with lock:
                servers.append(_local.server)
        return scenario(point[0], point[1], fresh, observe, baseline)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, points))
    finally:
        for server in servers:
            server.close()


def summary(store: str, outcomes: list[Outcome], seconds: float, labels: list[str]) -> str:
    """The line the crash test prints."""
    places: Counter[str] = Counter()
    for o in outcomes:
        kind, _, n = o.point.split()[0].partition(":")
        places[where(labels, int(n)) if kind == "sql" else f"in a {kind} body"] += 1
    killed = sum(1 for o in outcomes if o.killed)
    twice = sum(1 for o in outcomes if o.killed == 2)
    review = sum(1 for o in outcomes if o.statuses["needs_review"])
    interrupted = sum(1 for o in outcomes if o.statuses["interrupted"])
    failed = [o for o in outcomes if o.error]
    verdict = "all invariants held" if not failed else f"{len(failed)} FAILED"
    return (
        f"chaos {store}: {len(outcomes)} kill points, {killed} killed ({twice} killed again "
        f"while resuming), {review} with needs_review, {interrupted} with interrupted, "
        f"{verdict} in {seconds:.1f}s; kills " + ", ".join(f"{n} {p}" for p, n in places.items())
    )


MIN_POINTS = 50


def crash_test(
    store: str,
    fresh: Callable[[str], tuple[str, Path]],
    observe: Callable[[str], Observed],
    show: Callable[[str], None],
) -> None:
    """The whole crash test on one store: baseline, kill points, checks, the printed summary.

    ``fresh(name)`` gives a new empty store spec and effects file; ``observe(spec)`` reads the
    run from the store; ``show`` prints the summary where CI output shows it.
    ``STEADYRUN_CHAOS=all`` kills at every statement instead of a spread of at least 50.
    """
    spec, effects = fresh("baseline")
    straight = run_child(spec, "run", "0", effects)
    assert straight.returncode == 0 and straight.report, straight.stderr
    baseline = straight.report
    assert baseline["status"] == "completed", baseline
    assert [c[2] for c in baseline["calls"]].count("cancelled") == 1, baseline["calls"]
    statements = baseline["labels"]["sql"]
    tool_events = baseline["counts"]["tool"]

    if os.environ.get("STEADYRUN_CHAOS") == "all":
        sql_points = list(range(1, len(statements) + 1))
    else:
        sql_points = choose_points(statements)
    points: list[tuple[str, str | None]] = [(f"sql:{k}", None) for k in sql_points]
    points += [(f"tool:{k}", None) for k in range(1, tool_events + 1)]
    # Some resumes die too, at a statement of their own, before a last resume finishes.
    points += [
        (f"sql:{k}", f"sql:{5 + (k * 37) % 150}") for k in sql_points[len(sql_points) // 8 :: 8]
    ]

    started = time.monotonic()
    outcomes = run_all(points, fresh, observe, baseline, effects.parent)
    line = summary(store, outcomes, time.monotonic() - started, statements)
    show(
        f"{line} (an uninterrupted run makes {len(statements)} statements and "
        f"{tool_events} tool calls)"
    )

    failures = [f"{o.point}: {o.error}" for o in outcomes if o.error]
    assert not failures, line + "\n" + "\n".join(failures)
    assert sum(1 for o in outcomes if o.killed) >= MIN_POINTS, line
