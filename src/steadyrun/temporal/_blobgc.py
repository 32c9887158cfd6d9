"""Collecting the blobs of ended runs (``LargePayloadCodec.collect``).

A blob's owners are the workflows whose payloads referred to it (``OwnedBlobStore``). An owner
lets go of its blobs once Temporal reports its workflow closed more than a grace ago, read from
the workflow id's latest run: a run that continued as new is still running under the same id
(the blobs its carried state refers to stay), and a run started again for new input is live
again. A sub-agent's child workflow (``<run>/<call>``) also waits for its parent, whose
history holds the child's input and result. A workflow Temporal does not know (deleted by the
namespace's retention, or not started yet) lets go only of references older than the grace.
The grace keeps a closed run's result and history readable for a while (``TemporalRuns.result``
and replays decode them); after collection they no longer decode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._errors import UsageError
from steadyrun.temporal._blobtypes import BlobStore, OwnedBlobStore

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["BlobCollector", "collect_blobs"]

_log = logging.getLogger("steadyrun.temporal.blobs")


async def collect_blobs(
    client: Client,
    blobs: BlobStore,
    *,
    grace: timedelta = timedelta(hours=1),
    runs: Sequence[str] | None = None,
    now: datetime | None = None,
) -> int:
    """Delete the blobs no live or recently closed workflow refers to; returns how many.

    Args:
        client: A client of the namespace the runs' workflows live in.
        blobs: The codec's blob store (an ``OwnedBlobStore``).
        grace: How long after its workflow closed a run keeps its blobs. Keep it longer than
            anyone reads a closed run's result or history, and than a start takes to reach the
            cluster after its input was encoded.
        runs: Only these runs (and their sub-agents' child workflows); all owners by default.
        now: The current time (tests).

    Raises:
        UsageError: ``blobs`` keeps no owners.
    """
    return await _collect(client, _owned(blobs), grace, runs, now)


async def _collect(
    client: Client,
    blobs: OwnedBlobStore,
    grace: timedelta,
    runs: Sequence[str] | None,
    now: datetime | None,
    count: Callable[[int], None] | None = None,
) -> int:
    """``collect_blobs``; ``count`` hears of each owner's deletions as they happen.

    A collector's tally must not lag behind the store while its pass still asks the cluster
    about other owners (a caller who saw the blobs go read a stale count).
    """
    cutoff = (now or datetime.now(UTC)) - grace
    owners = await blobs.owners()
    if runs is not None:
        owners = [o for o in owners if any(o == r or o.startswith(f"{r}/") for r in runs)]
    ended: dict[str, bool] = {}
    deleted = 0
    for owner in owners:
        if await _ended(client, owner, cutoff, ended):
            # Only references older than the grace: a run started again under the same id
            # since Temporal was asked (or a start on its way) keeps what it wrote. References
            # a replay added after the close go at a later collection.
            released = await blobs.release(owner, cutoff)
            deleted += released
            if count is not None:
                count(released)
    return deleted


async def _ended(
    client: Client, workflow_id: str, cutoff: datetime, ended: dict[str, bool]
) -> bool:
    """Whether the workflow, and every ancestor, closed before ``cutoff`` (or is unknown)."""
    if workflow_id in ended:
        return ended[workflow_id]
    ended[workflow_id] = False  # a cycle of parents (it cannot happen) keeps the blobs
    try:
        desc = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        ended[workflow_id] = True
        return True
    closed = desc.close_time
    if desc.status == WorkflowExecutionStatus.RUNNING or closed is None or closed > cutoff:
        return False
    if desc.parent_id is not None and not await _ended(client, desc.parent_id, cutoff, ended):
        return False
    ended[workflow_id] = True
    return True


def _owned(blobs: BlobStore) -> OwnedBlobStore:
    if not isinstance(blobs, OwnedBlobStore):
        raise UsageError(f"{type(blobs).__name__} keeps no owners: its blobs cannot be collected")
    return blobs


class BlobCollector:
    """Collects a blob store's blobs every ``every`` while open (an async context manager).

    Made by ``LargePayloadCodec.collecting`` (and run by a ``TemporalEngine`` given
    ``collect_blobs_every``): a pass when it opens, then one every ``every``, each
    ``collect_blobs(client, blobs, grace=grace)``, so a run's blobs go about ``grace`` after
    its workflow closed without anyone scheduling it. A failing pass (the cluster or the blob
    store not answering) is logged and counted, and the next pass tries again. Run one
    collector per blob store (``FolderBlobs`` takes one collector at a time).

    Attributes:
        passes: Passes made so far.
        collected: Blobs deleted so far.
        failures: Passes that raised.
        last_error: The last pass's error, ``None`` once a pass succeeded.
    """

    def __init__(
        self,
        client: Client,
        blobs: BlobStore,
        *,
        every: timedelta = timedelta(minutes=10),
        grace: timedelta = timedelta(hours=1),
    ) -> None:
        if every <= timedelta(0):
            raise UsageError(f"a blob collector needs every > 0 between passes, not {every}")
        self.client = client
        self.blobs = _owned(blobs)
        self.every = every
        self.grace = grace
        self.passes = 0
        self.collected = 0
        self.failures = 0
        self.last_error: BaseException | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BlobCollector:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def start(self) -> None:
        """Start the passes in the running event loop (once)."""
        if self._task is None:
            self._stop = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(
                self._passes(), name="steadyrun-blob-collector"
            )

    async def stop(self) -> None:
        """Stop after the pass under way, if any."""
        task, self._task = self._task, None
        if task is not None:
            self._stop.set()
            await asyncio.gather(task, return_exceptions=True)

    def _count(self, deleted: int) -> None:
        self.collected += deleted

    async def _passes(self) -> None:
        while not self._stop.is_set():
            try:
                await _collect(self.client, self.blobs, self.grace, None, None, self._count)
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - logged; the next pass tries again
                self.failures += 1
                self.last_error = exc
                _log.warning("blob collection failed, trying again in %s: %s", self.every, exc)
            self.passes += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.every.total_seconds())
