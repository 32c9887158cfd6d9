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

Fresh children resume the run, some killed again, until one completes it, while a second
executor in each child tries to resume the run at random moments (``racer``). Then
``check_run`` reads the store and the effects file and checks the invariants; every check is
counted. This module is the workload (plans, models, kill points, the effects file); the fork
server, the runs and the counts are in ``randomrun``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun.background import PostgresTaskStore, SqliteTaskStore, Task
from steadyrun.chat import ToolResultPart
from steadyrun.records import RunSnapshot
from steadyrun.stores import FeedMessage
from steadyrun.stores._leases import StepWriter
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


RACING: ContextVar[bool] = ContextVar("racing", default=False)
"""Set in the racer's task (``racer.Racer``): the bodies it runs are marked in the effects."""


def record_effect(path: Path, tool: str, call_id: str, phase: str) -> None:
    """Append ``<tool> <call id> <phase> <pid>`` to the effects file in one ``O_APPEND`` write.

    A body the racing executor runs gets `` racer`` appended. Not fsynced: SIGKILL ends the
    process, not the machine; the page cache keeps the line.
    """
    by = " racer" if RACING.get() else ""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{tool} {call_id} {phase} {os.getpid()}{by}\n".encode())
    finally:
        os.close(fd)


def read_effects(path: Path) -> list[tuple[str, str, str]]:
    """``(tool, call id, phase)`` for every body start in the effects file."""
    if not path.exists():
        return []
    return [tuple(line.split()[:3]) for line in path.read_text().splitlines()]  # type: ignore[misc]


# -- what the test reads -------------------------------------------------------------------


@dataclass
class Observed:
    """What a store holds for the run, read by the test process.

    ``children``: the child runs of its delegations, by delegation call id; ``tasks``: its
    background tasks (read for the final observation only); ``writers``: the step log, who
    wrote each fenced step of the run and its child runs (``store.leases.writers``).
    """

    snapshot: RunSnapshot | None
    feed: list[FeedMessage]
    consumed: int
    children: dict[str, RunSnapshot] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)
    writers: list[StepWriter] = field(default_factory=list)


def child_run(call_id: str) -> str:
    """The run id of the child run of delegation ``call_id``."""
    return f"{RUN_ID}/{call_id}"


def task_store_of(spec: str) -> Any:
    """The background task store beside the run store a ``--store`` spec names."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SqliteTaskStore(Path(where).with_name("tasks.db"))
    schema, _, dsn = where.partition("|")
    return PostgresTaskStore(dsn, schema=schema + TASK_SUFFIX, max_size=2)
