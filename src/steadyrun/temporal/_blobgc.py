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

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from steadyrun._errors import UsageError
from steadyrun.temporal._blobtypes import BlobStore, OwnedBlobStore

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["collect_blobs"]


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
    if not isinstance(blobs, OwnedBlobStore):
        raise UsageError(f"{type(blobs).__name__} keeps no owners: its blobs cannot be collected")
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
            deleted += await blobs.release(owner, cutoff)
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
