"""``Leases``: which worker executes which run, with expiry and fencing.

Several worker processes share a store. Before executing a run a worker takes its lease: an
owner, an expiry and a fencing token that grows by one with every new holder. While the
worker executes the run it sets the lease as the current ``Fence`` (a context variable, so
every task the run starts carries it); the stores check the fence inside the transaction of
``save_step`` and ``save_call``: a write whose token is not the run's current one raises
``LeaseLostError`` and changes nothing. A worker that stalled past its expiry, and whose run
another worker took over, can therefore never write again.

The same table tracks which runs need a worker: every input appended and every host write
(``update_call``) made outside the run's own execution counts a *wake-up*; a run is runnable
while it has wake-ups no worker finished with and no live lease. Releasing a lease marks the
wake-ups seen when it was taken as handled, so a wake-up that came during the execution makes
the run runnable again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from steadyrun._errors import StoreError, UsageError
from steadyrun.records import CallRecord, is_settled

__all__ = [
    "ENGINE_PREFIX",
    "Fence",
    "Holder",
    "Keeper",
    "Lease",
    "LeaseLostError",
    "Leases",
    "StepWriter",
    "current_fence",
    "ensure_held",
    "fenced",
    "foreign_engine",
    "late_outcome",
    "ttl_micros",
]


class LeaseLostError(StoreError):
    """A write carried a lease that is no longer the run's: another worker (or a cancel) took it.

    The write changed nothing. The worker must stop executing the run.
    """


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease the writes of the current task are made under.

    Attributes:
        run_id: The leased (top-level) run; its sub-agent runs (``<run_id>/...``) are covered.
        owner: The worker holding the lease.
        token: The fencing token of the lease.
    """

    run_id: str
    owner: str
    token: int

    def covers(self, run_id: str) -> bool:
        """Whether writes to ``run_id`` are made under this lease (the run or a sub-agent run)."""
        return run_id == self.run_id or run_id.startswith(self.run_id + "/")


_FENCE: ContextVar[Fence | None] = ContextVar("steadyrun_fence", default=None)


def current_fence() -> Fence | None:
    """The fence of the current task, or ``None`` outside a leased execution."""
    return _FENCE.get()


@contextmanager
def fenced(fence: Fence | None, keeper: Keeper | None = None) -> Iterator[None]:
    """Make the writes of this task (and of tasks it starts) carry ``fence``.

    ``keeper``, when given, is what ``ensure_held`` asks before a model call or a call starts.
    """
    token = _FENCE.set(fence)
    kept = _KEEPER.set(keeper)
    try:
        yield
    finally:
        _KEEPER.reset(kept)
        _FENCE.reset(token)


class Keeper:
    """What the executor of a run knows of its claim between writes.

    The task renewing the claim marks it ``lost`` when a renewal is refused (or fails for a
    whole ttl); the loop asks ``ensure_held`` at its safe points, so an executor that lost
    its run makes no model call and starts no call even before a fenced write would fail.

    Attributes:
        fence: The claim's fence.
        lost: Whether the claim is known to be lost.
        handled: Whether releasing the claim marks its wake-ups handled (the executor sets
            ``False`` when it stops early and the run should be executed again at once).
    """

    def __init__(self, fence: Fence) -> None:
        self.fence = fence
        self.lost = False
        self.handled = True


_KEEPER: ContextVar[Keeper | None] = ContextVar("steadyrun_keeper", default=None)


def ensure_held() -> None:
    """Raise ``LeaseLostError`` when the current task executes a run whose claim it lost."""
    keeper = _KEEPER.get()
    if keeper is not None and keeper.lost:
        fence = keeper.fence
        raise LeaseLostError(
            f"executor {fence.owner!r} lost its claim (token {fence.token}) on run "
            f"{fence.run_id!r}; it stops here and the next owner recovers the run"
        )


def ttl_micros(ttl: float) -> int:
    """A claim's ttl in whole microseconds (how the stores keep expiries).

    Raises:
        UsageError: The ttl is not above 0 seconds.
    """
    if ttl <= 0:
        raise UsageError(f"a claim lasts more than 0 seconds, not {ttl}")
    return int(ttl * 1_000_000)


def late_outcome(call: CallRecord) -> bool:
    """Whether a call snapshot only records how a body that ran ended (it settles the call).

    ``save_call`` takes such a snapshot even from an executor whose claim is gone: it starts
    nothing, and it is the only word on what the body did, so a cancel or the next owner's
    recovery need not guess "may or may not have taken effect". Merging keeps it from
    overriding an outcome already recorded (settled outcomes are final).
    """
    return is_settled(call.status)


ENGINE_PREFIX = "engine:"
"""Owners ``engine:<name>:<id>`` are other engines (``engine:temporal:<workflow id>``).

Such an engine holds a run's claim for as long as the run lives; the built-in engine never
takes it over, waits on it, or writes host answers beside it.
"""


def foreign_engine(owner: str) -> str | None:
    """The engine named by a claim's owner (``temporal``), or ``None`` for this engine's."""
    if not owner.startswith(ENGINE_PREFIX):
        return None
    return owner[len(ENGINE_PREFIX) :].split(":", 1)[0] or None


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a run's claim now (``Leases.holder``).

    Attributes:
        run_id: The run.
        owner: The executor holding it.
        token: Its fencing token.
        expires_at: When it lapses unless renewed (UTC).
    """

    run_id: str
    owner: str
    token: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class StepWriter:
    """Who wrote one step of a run: the audit trail of leases (``Leases.writers``).

    Attributes:
        run_id: The run written (the leased run or one of its sub-agent runs).
        steps: The run's step count after the write (``RunRecord.steps``).
        owner: The worker that wrote it.
        token: The fencing token it held.
    """

    run_id: str
    steps: int
    owner: str
    token: int


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's hold on a run.

    Attributes:
        run_id: The run.
        owner: The worker.
        token: The fencing token (grows with every new holder of the run).
        wake: The run's wake-up count when the lease was taken.
    """

    run_id: str
    owner: str
    token: int
    wake: int

    @property
    def fence(self) -> Fence:
        """The fence writes under this lease carry."""
        return Fence(self.run_id, self.owner, self.token)


@runtime_checkable
class Leases(Protocol):
    """Leases on runs, shared by the workers of one store.

    Contract: at most one unexpired lease per run; ``acquire`` gives a run only when it has no
    live lease, with a token above every earlier one; ``revoke`` takes the lease even from a
    live holder (whose writes then fail); ``release`` ends a lease (a no-op for a lease no
    longer held) and marks its wake-ups handled unless ``handled=False``.
    """

    async def wake(self, run_id: str) -> None:
        """Count a wake-up of ``run_id`` (it needs a worker) and notify the workers."""
        ...

    async def runnable(self, *, limit: int = 10) -> list[str]:
        """Runs with unhandled wake-ups and no live lease, oldest wake-up first."""
        ...

    async def wait_runnable(self, max_wait: float) -> None:
        """Return when a wake-up may have come (notified), or after ``max_wait`` seconds."""
        ...

    async def acquire(
        self,
        run_id: str,
        owner: str,
        ttl: float,
        *,
        wake: bool = False,
        dead_token: int | None = None,
    ) -> Lease | None:
        """Take the run's lease for ``ttl`` seconds; ``None`` when another holds it.

        ``wake=True`` counts a wake-up in the same write (the lease's ``wake`` includes it):
        an executor that claims a run of its own accord (``Runtime.resume``) leaves it
        runnable should it die, so a worker takes it over once the lease expires.
        ``dead_token`` takes the lease from a live holder too when it still holds that token
        (its process is known to have died), and only then: a race with another taker is
        decided in the store.
        """
        ...

    async def holder(self, run_id: str) -> Holder | None:
        """Who holds the run's lease now, or ``None`` when nobody does (or it expired)."""
        ...

    async def renew(self, lease: Lease, ttl: float) -> bool:
        """Extend a held lease; ``False`` when it was lost (expired and taken, or revoked)."""
        ...

    async def release(self, lease: Lease, *, handled: bool = True) -> None:
        """End a lease; its wake-ups count as handled unless ``handled=False``."""
        ...

    async def revoke(self, run_id: str, owner: str, ttl: float) -> Lease:
        """Take the run's lease whatever holds it (a cancel does); the old holder is fenced."""
        ...

    async def writers(self, run_id: str) -> list[StepWriter]:
        """Who wrote each fenced step of ``run_id`` and its sub-agent runs, in write order."""
        ...

    async def close(self) -> None:
        """Stop listening for notifications."""
        ...
