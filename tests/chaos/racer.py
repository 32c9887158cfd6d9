"""A second executor racing the random child's own: one executor per run, under SIGKILLs too.

In every child of the random harness (``random_child.py --race N``), a ``Racer`` (its own
``Runtime`` on its own store connection, owner ``<host>:<pid>:racer``) tries to resume the
run at random moments while the child's executor runs it, acts as its host and resumes it
after a kill. The child's executor waits for the claim when the racer holds it
(``when_free``: ``resume(wait=...)`` again and again). Each try ends one way, appended to
``races.txt`` beside the effects:

- ``busy``: ``RunBusyError``, the child's executor holds the claim;
- ``idle``: it got the claim and found nothing to do (the run rests: suspended on the host,
  completed), writing no step;
- ``ran``: it got the claim while the run was runnable (input or a decision the host had just
  written, a kill's takeover) and executed it: for that while it is the run's one executor;
- ``absent``: the run is not stored yet;
- ``error <what>``: anything else (a violation).

``check_races`` (test side) checks, on top of ``randomcheck.check_run`` (which already holds
every body to one start per call): every try ended one of the first four ways, the racer
never started a body another executor had started, the journal has one record per call, and
the step log (``store.leases.writers``) shows one executor at a time: in write order a token
never goes back, each token has one owner, a run's step count only grows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from randomkit import RACING, RUN_ID, Observed

import steadyrun as sr
from steadyrun.runtime._claims import owner_id

if TYPE_CHECKING:
    from randomcheck import Checker

RACER = "racer"
"""The suffix of the racer's owner id (``<host>:<pid>:racer``)."""
MEAN_GAP = 0.02
"""Seconds between two tries of the racer, on average (uniform in 0..2x)."""
WAIT = 120.0
"""Seconds the child's own executor waits for the claim the racer holds."""
WAIT_STEP = 0.02
"""How long one ``resume(wait=...)`` of the child's executor waits before it tries again."""
OUTCOMES = ("busy", "idle", "ran", "absent")


def races_file(effects: Path) -> Path:
    """Where the racer of a run's children logs its tries (beside the effects file)."""
    return effects.with_name("races.txt")


class _Counted:
    """Forwards to a store; counts the steps written through it (``idle`` versus ``ran``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.steps = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "save_step":
            return attr

        async def save_step(*args: Any, **kwargs: Any) -> Any:
            self.steps += 1
            return await attr(*args, **kwargs)

        return save_step


class Racer:
    """Tries to resume the run at random moments through a runtime and store of its own."""

    def __init__(self, store: Any, agent: sr.Agent, effects: Path, seed: int) -> None:
        self.store = _Counted(store)
        self.runtime = sr.Runtime(self.store, owner=owner_id(RACER))
        self.agent = agent
        self.log = races_file(effects)
        self.rng = random.Random(seed)

    async def _try(self) -> str:
        before = self.store.steps
        try:
            await self.runtime.resume(RUN_ID, agent=self.agent)
        except sr.RunBusyError:
            return "busy"
        except sr.RunNotFoundError:
            return "absent"
        except Exception as exc:  # reported as a violation by the test process
            return f"error {type(exc).__name__}: {exc}".replace("\n", " ")
        return "ran" if self.store.steps > before else "idle"

    async def race(self, stop: asyncio.Event) -> None:
        """Try until ``stop`` is set; the bodies this task runs are marked in the effects."""
        RACING.set(True)  # this task's context only (and the tasks it starts)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.rng.uniform(0, 2 * MEAN_GAP))
            if stop.is_set():
                return
            outcome = await self._try()
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{outcome}\n".encode())
            finally:
                os.close(fd)


async def when_free(execute: Callable[[float], Awaitable[sr.RunResult]]) -> sr.RunResult:
    """``execute(wait)`` (a ``run`` or ``resume``), again while the racer holds the claim.

    Short waits, retried: ``resume(wait=WAIT)`` would back off up to a second between looks,
    and the harness would spend its time waiting rather than racing.
    """
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return await execute(WAIT_STEP)
        except sr.RunBusyError:
            if time.monotonic() > deadline:
                raise


@contextlib.asynccontextmanager
async def racing(store: Any, agent: sr.Agent, effects: Path, seed: int) -> AsyncIterator[None]:
    """Race the body of the ``async with``; on its end, let the racer finish its try."""
    stop = asyncio.Event()
    task = asyncio.create_task(Racer(store, agent, effects, seed).race(stop), name="racer")
    try:
        yield
    finally:
        stop.set()
        await task


# -- the test side -----------------------------------------------------------------------------


def read_races(effects: Path) -> list[str]:
    """The racer's tries in the children of one store (one outcome a line)."""
    path = races_file(effects)
    return path.read_text().splitlines() if path.exists() else []


def check_tries(ck: Checker, tries: list[str]) -> Counter[str]:
    """Every try of the racer ended busy, idle, ran or absent; the tries counted by outcome."""
    outcomes: Counter[str] = Counter()
    for t in tries:
        outcome = t.split(" ", 1)[0]
        ck.check(outcome in OUTCOMES, f"the racer's try ended {t!r}")
        outcomes[outcome] += 1
    return outcomes


def check_races(ck: Checker, tries: list[str], lines: list[str], final: Observed) -> Counter[str]:
    """The racing invariants of one run (see the docstring); the tries counted by outcome, the
    racer's bodies (``racer bodies``) and steps (``racer steps``).

    ``lines``: the effects file's lines, racer marks included.
    """
    outcomes = check_tries(ck, tries)
    # The racer never started a body another executor had started (or started it again).
    fields = [line.split() for line in lines]
    starts = Counter((f[0], f[1], f[2]) for f in fields)
    raced = [(f[0], f[1], f[2]) for f in fields if f[4:] == [RACER]]
    for body in raced:
        ck.check(starts[body] == 1, f"the racer started {body}, started {starts[body]} times")
    outcomes["racer bodies"] += len(raced)
    # One record per call: no call twice in a run's journal, no model call recorded twice.
    runs = [final.snapshot, *final.children.values()]
    for snap in runs:
        if snap is None:
            continue
        ids = Counter(c.id for c in snap.calls)
        asked = Counter((c.parent_id, c.provider_call_id) for c in snap.calls)
        ck.check(max(ids.values(), default=1) == 1, f"{snap.run.run_id}: a call id twice: {ids}")
        ck.check(max(asked.values(), default=1) == 1, f"{snap.run.run_id}: a model call twice")
    # The step log: one executor at a time.
    owners: dict[int, str] = {}
    steps: dict[str, int] = {}
    last = 0
    for w in final.writers:
        ck.check(w.token >= last, f"token {w.token} wrote after token {last}")
        last = max(last, w.token)
        ck.check(owners.setdefault(w.token, w.owner) == w.owner, f"token {w.token}: two owners")
        ck.check(w.steps > steps.get(w.run_id, -1), f"{w.run_id}: step {w.steps} written again")
        steps[w.run_id] = w.steps
        if w.owner.endswith(f":{RACER}"):
            outcomes["racer steps"] += 1
    return outcomes
