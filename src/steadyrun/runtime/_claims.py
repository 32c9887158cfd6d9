"""Claims: one executor per run, whatever the process or the path that executes it.

Before an executor (``Runtime.run``/``resume``, a worker, ``serve``) loads a run to execute it,
it takes the run's claim from the store (``store.leases``): an owner, a fencing token that
only grows, an expiry. While it executes, the claim is the fence of every write (the stores
refuse a write whose token is not the run's current one) and a task renews it every third of
its ttl, also while a long tool runs. A second executor gets ``RunBusyError`` at once, or waits
when asked to. An executor that lost its claim stops at its next safe point (``ensure_held``
before a model call or a call's start; a fenced write fails anyway). A run whose executor died
keeps an unhandled wake-up, so once its claim expires a worker takes it over and recovers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from steadyrun._errors import ForeignEngineError, RunBusyError, SteadyrunError, UsageError
from steadyrun.stores._leases import (
    Holder,
    Keeper,
    Lease,
    Leases,
    current_fence,
    fenced,
    foreign_engine,
)

__all__ = ["Claims", "check_writable", "owner_died", "owner_id"]

log = logging.getLogger("steadyrun.claims")

_WAIT_STEP = 0.1
_WAIT_MAX_STEP = 1.0


def owner_id(suffix: str) -> str:
    """An executor id: this host, this process id and ``suffix`` (``host:pid:suffix``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{suffix}"


def owner_died(owner: str) -> bool:
    """Whether ``owner`` (an id made by ``owner_id``) names a process of this host that is gone.

    Only a certain death counts: another host, an id of another form, a live process (or one
    whose id was reused) all answer ``False``, and the claim is left to expire instead. A
    zombie (killed, not yet reaped) is dead.
    """
    host, sep, rest = owner.partition(":")
    pid_text, sep2, _ = rest.partition(":")
    if not (sep and sep2 and pid_text.isdigit()) or host != socket.gethostname():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, someone else's
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


_HELD: set[tuple[str, str, int]] = set()
"""The claims executors of this process hold now: (owner, run id, token)."""

_TAKING: Counter[tuple[str, str]] = Counter()
"""Tries at a claim in flight in this process: (owner, run id). The store grants a claim when
its transaction commits, and the taker registers it in ``_HELD`` only once its coroutine
resumes (on PostgreSQL a few awaits later): meanwhile the claim is live, not left behind."""


def _stale(holder: Holder) -> bool:
    """Whether ``holder``'s claim is known to have no live executor behind it.

    Its owner is a process of this host that is gone, or this very process, where no executor
    holds it any more (one that stopped without releasing it, say on a store failure) nor is
    getting it from the store right now.
    """
    host, _, rest = holder.owner.partition(":")
    if host == socket.gethostname() and rest.partition(":")[0] == str(os.getpid()):
        if _TAKING[(holder.owner, holder.run_id)] > 0:
            return False
        return (holder.owner, holder.run_id, holder.token) not in _HELD
    return owner_died(holder.owner)


async def check_writable(leases: Leases, run_id: str) -> None:
    """Refuse a host write to a run that another engine executes (it would change nothing).

    Raises:
        ForeignEngineError: The run's claim is held by another engine (Temporal).
    """
    fence = current_fence()
    if fence is not None and fence.covers(run_id):
        return  # written by the run's own executor: its claim is this engine's (or fenced out)
    holder = await leases.holder(run_id.split("/", 1)[0])
    if holder is not None and foreign_engine(holder.owner) is not None:
        raise ForeignEngineError(run_id, holder.owner, holder.expires_at)


class Claims:
    """Takes, holds, renews and releases the claims of one executor.

    Args:
        leases: The store's claims (``store.leases``).
        owner: The executor's id (in errors, ``RunBusyError.owner`` and the step log).
        ttl: Seconds a claim lasts unless renewed; a dead executor's run waits this long.
    """

    def __init__(self, leases: Leases, owner: str, ttl: float) -> None:
        if ttl <= 0:
            raise UsageError(f"a claim's ttl must be above 0 seconds, not {ttl}")
        self.leases = leases
        self.owner = owner
        self.ttl = ttl

    async def acquire(
        self, run_id: str, *, wake: bool = False, dead_token: int | None = None
    ) -> Lease | None:
        """One try at the run's claim (``Leases.acquire``); ``None`` when another holds it.

        A claim granted counts as held by this process from the moment the store grants it
        (``holding`` keeps it so), so no other executor here takes it for one left behind.
        """
        key = (self.owner, run_id)
        _TAKING[key] += 1
        try:
            lease = await self.leases.acquire(
                run_id, self.owner, self.ttl, wake=wake, dead_token=dead_token
            )
            if lease is not None:
                _HELD.add((lease.owner, lease.run_id, lease.token))
            return lease
        finally:
            _TAKING[key] -= 1
            if _TAKING[key] <= 0:
                del _TAKING[key]

    async def take(self, run_id: str, *, wait: float = 0.0) -> Lease:
        """Take the run's claim, waiting up to ``wait`` seconds for its holder to let go.

        The take counts a wake-up: should this executor die, the run stays runnable and a
        worker takes it over once the claim expires.

        Raises:
            RunBusyError: Another executor still holds the claim.
        """
        if wait < 0:
            raise UsageError(f"wait is a number of seconds >= 0, not {wait}")
        deadline = time.monotonic() + wait if not math.isinf(wait) else math.inf
        step = _WAIT_STEP
        dead: int | None = None
        while True:
            lease = await self.acquire(run_id, wake=True, dead_token=dead)
            if lease is not None:
                return lease
            holder = await self.leases.holder(run_id)
            if holder is None:
                continue  # it let go between the two looks
            if foreign_engine(holder.owner) is not None:
                raise ForeignEngineError(run_id, holder.owner, holder.expires_at)
            if dead != holder.token and _stale(holder):
                dead = holder.token  # its holder is gone (a killed process): no need to wait
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunBusyError(run_id, holder.owner, holder.expires_at)
            await asyncio.sleep(min(step, left))
            step = min(step * 2, _WAIT_MAX_STEP)

    @asynccontextmanager
    async def executing(self, run_id: str, *, wait: float = 0.0) -> AsyncIterator[None]:
        """Hold the run's claim for the body of the ``async with``.

        Inside an execution that holds a claim covering ``run_id`` already (a worker's, or a
        parent run's for a sub-agent run) nothing more is taken.
        """
        fence = current_fence()
        if fence is not None and fence.covers(run_id):
            yield
            return
        lease = await self.take(run_id, wait=wait)
        async with self.holding(lease):
            yield

    @asynccontextmanager
    async def holding(
        self, lease: Lease, *, on_lost: Callable[[], None] | None = None
    ) -> AsyncIterator[Keeper]:
        """Execute under ``lease``: fence writes with it, renew it, release it at the end.

        The claim's wake-ups count as handled on release unless the body was cancelled or
        set ``keeper.handled = False`` (then the run is executed again at once by a worker).
        ``on_lost`` is called when a renewal finds the claim gone.
        """
        keeper = Keeper(lease.fence)
        held = (lease.owner, lease.run_id, lease.token)
        _HELD.add(held)
        stopped = asyncio.Event()
        renewer = asyncio.create_task(
            self._renew(lease, keeper, on_lost, stopped), name=f"steadyrun-claim-{lease.run_id}"
        )
        try:
            with fenced(lease.fence, keeper):
                yield keeper
        except asyncio.CancelledError:
            keeper.handled = False  # stopped as a crash stops it: let the next owner go on
            raise
        finally:
            # The flag, not the cancel alone: a renewal in flight may lose the cancel (under
            # load on PostgreSQL a renewal was seen to return normally after its task was
            # cancelled, ``cancelling() == 1``: the driver's waits dropped it). A renewer that
            # went on renewing kept this claim live for ever and the release never came: the
            # run, its wake-ups unhandled, was never taken again (a decision never acted on).
            stopped.set()
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
            try:
                if not keeper.lost:
                    with contextlib.suppress(SteadyrunError):
                        await self.leases.release(lease, handled=keeper.handled)
            finally:
                # Only now: until its release is stored the claim is live, not left behind.
                _HELD.discard(held)

    async def _renew(
        self,
        lease: Lease,
        keeper: Keeper,
        on_lost: Callable[[], None] | None,
        stopped: asyncio.Event,
    ) -> None:
        """Renew the claim every third of its ttl until ``stopped`` is set (or it is lost)."""
        every = self.ttl / 3
        failures = 0
        while not stopped.is_set():
            await asyncio.sleep(every)
            if stopped.is_set():
                return
            try:
                held = await self.leases.renew(lease, self.ttl)
                failures = 0
            except SteadyrunError:
                failures += 1
                held = failures < 3  # three failed renewals span the whole ttl
            if stopped.is_set():
                return  # the execution ended meanwhile (its cancel may have been lost)
            if not held:
                log.warning(
                    "executor %s lost its claim on run %r; it stops at its next safe point",
                    lease.owner,
                    lease.run_id,
                )
                keeper.lost = True
                if on_lost is not None:
                    on_lost()
                return
