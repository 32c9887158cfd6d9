"""The crash tests' side: kill scenarios, the invariants of recovery, the whole test.

``crash_test`` runs the workload of ``chaoskit`` once uninterrupted (the baseline), then kills
it at spread-out points (``choose_points``), resumes it in fresh children (``chaosproc``) and
checks each scenario against the baseline (``verify``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chaosproc
from chaoskit import INPUT_ID, STEER_ID
from chaosproc import ForkServer, run_child

from steadyrun.chat import Message, dumps, loads
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.stores import FeedMessage


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
        assert resumed["messages"] == baseline["messages"], (
            "the context differs from baseline: " + _first_difference(resumed, baseline)
        )
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


def _first_difference(resumed: dict[str, Any], baseline: dict[str, Any]) -> str:
    """Where two contexts part, in a line (a failing point says what went wrong)."""
    got = [_short(m) for m in loads(resumed["messages"], list[Message])]
    want = [_short(m) for m in loads(baseline["messages"], list[Message])]
    pairs = enumerate(zip(got, want, strict=False))
    at = next((i for i, (a, b) in pairs if a != b), min(len(got), len(want)))
    return f"message {at}: {got[at : at + 2]} where the baseline has {want[at : at + 2]}"


def _short(m: Message) -> str:
    ids = [getattr(p, "call_id", None) or getattr(p, "id", "") for p in m.parts]
    parts = [f"{type(p).__name__}({i})" for p, i in zip(m.parts, ids, strict=True)]
    return f"{m.role}:{m.text[:50]!r}:{','.join(parts)}"


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
        if getattr(chaosproc.local, "server", None) is None:
            chaosproc.local.server = ForkServer(folder)
            with lock:
                servers.append(chaosproc.local.server)
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
