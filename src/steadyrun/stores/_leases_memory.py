"""``MemoryLeases``: claims, fencing and wake-ups of runs in a ``MemoryStore``.

The same rules as the durable stores' ``work`` tables, kept in a dict: two ``Runtime``
objects (or a worker and a ``Runtime``) on one ``MemoryStore`` exclude each other exactly as
two processes on one SQLite file do. Expiry uses the monotonic clock of this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from steadyrun.stores._leases import (
    Holder,
    Lease,
    LeaseLostError,
    StepWriter,
    current_fence,
    ttl_micros,
)

__all__ = ["MemoryLeases"]


@dataclass(slots=True)
class _Work:
    wanted: int = 0
    handled: int = 0
    woken: float = 0.0
    owner: str | None = None
    token: int = 0
    expires: float = 0.0


@dataclass(slots=True)
class _State:
    work: dict[str, _Work] = field(default_factory=dict)
    log: list[tuple[str, StepWriter]] = field(default_factory=list)


class MemoryLeases:
    """The ``Leases`` of a ``MemoryStore``.

    Example:
        ``lease = await store.leases.acquire("r-1", "w1", 30)``
    """

    def __init__(self) -> None:
        self._state = _State()
        self._event = asyncio.Event()

    # -- hooks of the store ------------------------------------------------------------------

    def check(self, run_id: str, steps: int | None = None) -> None:
        """Refuse a write of the current task when its fence is not the run's current claim.

        Raises:
            LeaseLostError: Another executor took the claim (or a cancel revoked it).
        """
        fence = current_fence()
        if fence is None or not fence.covers(run_id):
            return
        work = self._state.work.get(fence.run_id)
        if work is None or work.token != fence.token or work.owner is None:
            holder = "nobody" if work is None or work.owner is None else repr(work.owner)
            raise LeaseLostError(
                f"write to run {run_id!r} refused: executor {fence.owner!r} holds token "
                f"{fence.token} of {fence.run_id!r}, but the claim is now {holder}"
            )
        if steps is not None:
            self._state.log.append(
                (fence.run_id, StepWriter(run_id, steps, fence.owner, fence.token))
            )

    def woken(self, run_id: str) -> None:
        """Count a wake-up unless the run's own executor wrote (store hook after a write)."""
        fence = current_fence()
        root = run_id.split("/", 1)[0]
        if fence is not None and fence.covers(root):
            return
        self._wake(root)

    def unhandled(self, run_id: str) -> bool:
        """Whether the run has wake-ups no executor handled yet."""
        work = self._state.work.get(run_id)
        return work is not None and work.wanted > work.handled

    def forget(self, run_id: str) -> None:
        """Drop the run's claim, wake-ups and step log (its run was deleted)."""
        self._state.work.pop(run_id, None)
        self._state.log = [entry for entry in self._state.log if entry[0] != run_id]

    # -- Leases ------------------------------------------------------------------------------

    async def wake(self, run_id: str) -> None:
        """Count a wake-up of ``run_id``."""
        self._wake(run_id)

    async def runnable(self, *, limit: int = 10) -> list[str]:
        """Runs with unhandled wake-ups and no live claim, oldest wake-up first."""
        now = time.monotonic()
        ready = [
            (w.woken, run_id)
            for run_id, w in self._state.work.items()
            if w.wanted > w.handled and (w.owner is None or w.expires < now)
        ]
        return [run_id for _, run_id in sorted(ready)[:limit]]

    async def wait_runnable(self, max_wait: float) -> None:
        """Wait for a wake-up, at most ``max_wait`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), max_wait)
        self._event.clear()

    async def acquire(
        self,
        run_id: str,
        owner: str,
        ttl: float,
        *,
        wake: bool = False,
        dead_token: int | None = None,
    ) -> Lease | None:
        """Take the claim when nobody holds it (or its holder's expired); else ``None``."""
        work = self._state.work.get(run_id)
        force = dead_token is not None and work is not None and work.token == dead_token
        return self._take(run_id, owner, ttl, force=force, wake=wake)

    async def revoke(self, run_id: str, owner: str, ttl: float) -> Lease:
        """Take the claim whatever holds it; the previous holder's writes fail from now on."""
        lease = self._take(run_id, owner, ttl, force=True, wake=False)
        assert lease is not None  # a forced take always succeeds
        return lease

    async def holder(self, run_id: str) -> Holder | None:
        """Who holds the run's claim now, or ``None``."""
        work = self._state.work.get(run_id)
        if work is None or work.owner is None:
            return None  # no clock read: Temporal's workflows ask this too
        now = time.monotonic()
        if work.expires < now:
            return None
        expires = datetime.now(UTC) + timedelta(seconds=work.expires - now)
        return Holder(run_id=run_id, owner=work.owner, token=work.token, expires_at=expires)

    async def renew(self, lease: Lease, ttl: float) -> bool:
        """Extend a held claim by ``ttl`` seconds; ``False`` when it was lost."""
        span = ttl_micros(ttl) / 1_000_000
        work = self._state.work.get(lease.run_id)
        if work is None or work.owner != lease.owner or work.token != lease.token:
            return False
        work.expires = time.monotonic() + span
        return True

    async def release(self, lease: Lease, *, handled: bool = True) -> None:
        """End the claim; its wake-ups count as handled unless ``handled=False``."""
        work = self._state.work.get(lease.run_id)
        if work is None or work.owner != lease.owner or work.token != lease.token:
            return
        work.owner = None
        work.expires = 0.0
        if handled:
            work.handled = max(work.handled, lease.wake)
        if work.wanted > work.handled:
            self._event.set()

    async def writers(self, run_id: str) -> list[StepWriter]:
        """Who wrote each fenced step of the run and its sub-agent runs, in write order."""
        return [writer for root, writer in self._state.log if root == run_id]

    async def close(self) -> None:
        """Nothing to stop."""

    # -- inside ------------------------------------------------------------------------------

    def _wake(self, run_id: str) -> None:
        work = self._state.work.setdefault(run_id, _Work())
        if work.wanted <= work.handled:
            work.woken = time.monotonic()
        work.wanted += 1
        self._event.set()

    def _take(
        self, run_id: str, owner: str, ttl: float, *, force: bool, wake: bool
    ) -> Lease | None:
        span = ttl_micros(ttl) / 1_000_000
        work = self._state.work.setdefault(run_id, _Work())
        now = time.monotonic()
        if not force and work.owner is not None and work.expires >= now:
            return None
        if wake:
            if work.wanted <= work.handled:
                work.woken = now
            work.wanted += 1
        work.owner = owner
        work.token += 1
        work.expires = now + span
        return Lease(run_id=run_id, owner=owner, token=work.token, wake=work.wanted)
