"""The invariants the random fault harness checks after every run (see randomkit.py).

Each check counts itself in a ``Checker`` and records a violation instead of stopping at the
first, so one run reports everything it broke.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import randomkit as rk

from steadyrun.chat import Message, ToolResultPart, dumps
from steadyrun.records import CallRecord, merge_call
from steadyrun.records._call import ACTIVE_STATUSES

# -- the checks --------------------------------------------------------------------------------


@dataclass
class Checker:
    """Counts checks; collects violations instead of stopping at the first."""

    label: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)
    """Situations the checks met (a delegation resumed, a task taken over...), counted."""

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
    plan: list[list[rk.PlanCall]],
    baseline: dict[str, Any],
    killed: list[rk.Observed],
    final: rk.Observed,
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
    sent = [rk.INPUT_ID] + [c.pid for batch in plan for c in batch if c.kind == "steer"]
    sent += [rk.notice_id(t.id) for t in final.tasks]
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
    # A sub-agent's bodies log ``<delegation>/<child call>``: the id of the copy of its
    # record under the delegation, or of the record in the child run when nothing was copied.
    bg_lines = [e for e in effects if e[0] == rk.BACKGROUND]
    effects = [e for e in effects if e[0] != rk.BACKGROUND]
    known = dict(calls)
    for parent, child in final.children.items():
        for c in child.calls:
            known.setdefault(f"{parent}/{c.id}", c)
    ran = Counter((call_id, phase) for _, call_id, phase in effects)
    for (call_id, phase), n in ran.items():
        ck.check(n == 1, f"the body of {call_id} ({phase}) started {n} times")
        ck.check(call_id in known, f"the body of {call_id} ran but the store has no such call")
    for tool, call_id, _ in effects:
        if call_id in known:
            ck.check(known[call_id].name == tool, f"{call_id} ran {tool}, record says other")
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
        ck.check(c.decision.approve == rk.approves(cents), f"{c.id} decided {c.decision}")
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
            paid = f"paid {amount} with {rk.card_for(amount)}"
            want = rk.wire_for(amount) if c.name == "bank" else paid
            ck.check(c.result == want, f"{c.id} ({c.name}) result {c.result!r}, want {want!r}")
        if c.status in ("cancelled", "rejected"):
            ck.check(run_phase[c.id] == 0, f"{c.id} is {c.status} but its body ran")

    # (5) merge rules: nothing left active; across the snapshots taken at each kill and the
    # final one, revs never go back, a settled outcome never changes, a decision stays; an
    # older snapshot merged over the final record changes nothing, and a newer one cannot
    # change a settled outcome
    cut_off: set[str] = set()
    history: dict[str, list[CallRecord]] = {}
    unknown_child: set[str] = set()  # delegations whose child was cut off in a side effect
    for o in killed:
        for c in o.snapshot.calls if o.snapshot else []:
            history.setdefault(c.id, []).append(c)
            if c.status == "running" and not c.handover:
                cut_off.add(c.id)
        for parent, child in o.children.items():
            for c in child.calls:
                if c.status == "running" and not c.handover:
                    cut_off.add(f"{parent}/{c.id}")
                    if c.side_effects and not c.replayable:
                        unknown_child.add(parent)
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
        # (6) a call cut off while running is settled by its traits; nothing else is unknown.
        # A delegation cut off resumes its child, unless the child was cut off in a side
        # effect (then it needs review, and only then).
        if c.name == rk.DELEGATE:
            want = "needs_review" if c.id in unknown_child else "succeeded"
            ck.check(c.status == want, f"delegation {c.id} ended {c.status}, want {want}")
            if c.id in cut_off:
                ck.seen[f"delegation cut off, {c.status}"] += 1
        elif c.id in cut_off:
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
    # (a sub-agent's interrupted call is retried inside its child run: the delegation's
    # result, all the parent's context sees, is the same; only the list of calls differs)
    unknown = {
        c.provider_call_id
        for c in snap.calls
        if c.status in ("interrupted", "needs_review") and c.parent_id is None
    }
    if not unknown:
        ck.check(context == base, "the context differs from the uninterrupted run's")
        retried = any(c.status == "interrupted" for c in snap.calls)
        got = [[c.id, c.name, c.status] for c in snap.calls]
        want = baseline["calls"]
        if retried:
            got = [g for g, c in zip(got, snap.calls, strict=True) if c.parent_id is None]
            want = [w for w in want if "/" not in w[0]]
        ck.check(got == want, f"calls {got} != {want}")
    else:
        cut = _unknown_results(snap.context, unknown)
        n = len(snap.context) if cut is None else cut
        ck.check(context[:n] == base[:n], f"the context's first {n} messages differ from baseline")

    check_subagents(ck, plan, final, unknown_child)
    check_background(ck, final, bg_lines)
    return statuses


def check_subagents(
    ck: Checker, plan: list[list[rk.PlanCall]], final: rk.Observed, unknown_child: set[str]
) -> None:
    """(8) Each delegation: its child run's calls copied under it, settled, once it ended."""
    assert final.snapshot is not None
    calls = final.snapshot.calls
    planned = {c.pid for batch in plan for c in batch if c.kind == "subagent"}
    for d in calls:
        if d.name != rk.DELEGATE:
            continue
        child = final.children.get(d.id)
        copies = {c.id: c for c in calls if c.parent_id == d.id}
        if d.status == "needs_review":
            ck.check(d.id in unknown_child, f"delegation {d.id} needs review, no child was cut off")
            check_ended_child(ck, d.id, child, copies)
            continue
        if not ck.check(child is not None, f"delegation {d.id} ({d.status}) has no child run"):
            continue
        assert child is not None
        ck.check(child.run.status == "completed", f"child of {d.id} ended {child.run.status}")
        task = json.loads(json.loads(d.arguments)["task"])["task"]
        ck.check(task in planned, f"delegation {d.id} of task {task}, not in the plan")
        want_text = rk.sub_final(task)
        ck.check(d.status == "succeeded", f"delegation {d.id} ended {d.status}: {d.result}")
        ck.check(d.result == want_text, f"delegation {d.id} result {d.result!r}")
        want = {f"{d.id}/{c.id}": c for c in child.calls}
        ck.check(
            set(copies) == set(want), f"delegation {d.id} copies {sorted(copies)} != {sorted(want)}"
        )
        for cid, c in want.items():
            copy = copies.get(cid)
            if copy is None:
                continue
            ck.check(copy.settled, f"copied sub-call {cid} is {copy.status}")
            ck.check(
                (copy.name, copy.status, copy.result) == (c.name, c.status, c.result),
                f"copied sub-call {cid} is {copy.status}, the child's {c.status}",
            )
            ck.check(c.status != "needs_review", f"sub-call {cid} needs review in a done child")
            if c.status == "interrupted":
                ck.seen["sub-agent call interrupted, retried"] += 1


def check_ended_child(
    ck: Checker, delegation: str, child: Any, copies: dict[str, CallRecord]
) -> None:
    """A delegation needing review: its child run ended, settled, copied under it."""
    if not ck.check(child is not None, f"delegation {delegation} needs review, has no child"):
        return
    run = child.run
    ck.check(
        (run.status, run.error_kind) == ("failed", "SubAgentInterrupted"),
        f"child of {delegation} (needs review) is {run.status} ({run.error_kind})",
    )
    for c in child.calls:
        ck.check(c.status not in ACTIVE_STATUSES, f"{delegation}'s child left {c.id} {c.status}")
    ck.check(
        any(c.status == "needs_review" for c in child.calls),
        f"child of {delegation} (needs review) has no call needing review",
    )
    want = {f"{delegation}/{c.id}": c for c in child.calls}
    ck.check(set(copies) == set(want), f"{delegation} copies {sorted(copies)} != {sorted(want)}")
    for cid, c in want.items():
        copy = copies.get(cid)
        if copy is not None:
            ck.check(
                (copy.name, copy.status) == (c.name, c.status),
                f"copied sub-call {cid} is {copy.status}, the ended child's {c.status}",
            )
    ck.seen["delegation needs review, child ended and copied"] += 1


def check_background(ck: Checker, final: rk.Observed, lines: list[tuple[str, str, str]]) -> None:
    """(9) Each background task: started once, completed once, announced once, claimed."""
    assert final.snapshot is not None
    calls = {c.id: c for c in final.snapshot.calls}
    tasks = {t.id: t for t in final.tasks}
    context_ids = Counter(m.id for m in final.snapshot.context if m.role == "system")
    feed_ids = Counter(m.id for m in final.feed)
    starts = Counter(task for _, task, phase in lines if phase == "start")
    completed = Counter(task for _, task, phase in lines if phase == "completed")
    for task_id, n in starts.items():
        ck.check(n == 1, f"background operation {task_id} started {n} times")
        call_id = task_id.removeprefix(rk.RUN_ID + "/")
        if task_id not in tasks:  # killed in the foreground wait: the call is unknown
            status = calls[call_id].status if call_id in calls else "missing"
            ck.check(status == "needs_review", f"{task_id} started, no task, call {status}")
            ck.seen["background cut off in the foreground wait"] += 1
    phases = Counter(phase for _, _, phase in lines)
    for phase, what in (("reenter", "start re-entered"), ("recover", "task taken over")):
        if phases[phase]:
            ck.seen[f"background {what} after a kill"] += phases[phase]
    for _, task_id, phase in lines:
        ck.check(task_id in starts, f"background {task_id} {phase} but never started")
    for task in tasks.values():
        call = calls.get(task.call_id)
        if not ck.check(call is not None, f"task {task.id} of no call"):
            continue
        assert call is not None
        ck.check(call.name == rk.BACKGROUND, f"task {task.id} of a {call.name} call")
        ck.check(call.status in ("succeeded", "needs_review"), f"{call.id} ended {call.status}")
        if call.status == "succeeded":
            ck.check(rk.task_of_receipt(call.result) == task.id, f"{call.id} result {call.result}")
        else:
            ck.seen["background call needs review, its task ran on"] += 1
        ck.check(task.status == "completed", f"task {task.id} ended {task.status}: {task.error}")
        ck.check(completed[task.id] <= 1, f"task {task.id} completed {completed[task.id]} times")
        ck.check(task.notified, f"task {task.id} is not marked notified")
        note = rk.notice_id(task.id)
        ck.check(feed_ids[note] == 1, f"{note} is {feed_ids[note]} times in the feed")
        ck.check(context_ids[note] == 1, f"{note} is {context_ids[note]} times in the context")
    for c in calls.values():
        if c.name == rk.BACKGROUND and c.status == "succeeded":
            task_id = rk.task_of_receipt(c.result)
            ck.check(task_id in tasks, f"{c.id} launched {task_id}, which is not stored")
