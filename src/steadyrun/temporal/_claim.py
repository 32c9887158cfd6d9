"""A Temporal run's claim in the app's store: held by its workflow for as long as the run lives.

The built-in engine (``Runtime``, a worker, ``serve``, the CLI) reads the claim's owner,
``engine:temporal:<workflow id>``, and neither executes the run (``ForeignEngineError``) nor
stores host writes beside it: those go to the workflow through ``TemporalRuns``.
"""

from __future__ import annotations

from steadyrun.stores import Store
from steadyrun.stores._leases import ENGINE_PREFIX, Fence, foreign_engine

__all__ = ["ENGINE", "ENGINE_TTL", "engine_claim", "engine_owner"]

ENGINE = "temporal"
"""This engine's name in claim owners."""

ENGINE_TTL = 100 * 365 * 24 * 3600.0
"""A claim the workflow never renews: the run is Temporal's for good (seconds)."""


def engine_owner(workflow_id: str) -> str:
    """The owner of a workflow's claims: ``engine:temporal:<workflow id>``."""
    return f"{ENGINE_PREFIX}{ENGINE}:{workflow_id}"


async def engine_claim(store: Store, run_id: str, workflow_id: str) -> Fence:
    """The fence the record activity writes ``run_id`` under, claiming the run first if need be.

    A run the built-in engine held (it should not have) is taken from it: its writes are
    fenced out from then on.
    """
    root = run_id.split("/", 1)[0]
    holder = await store.leases.holder(root)
    if holder is not None and foreign_engine(holder.owner) == ENGINE:
        return Fence(root, holder.owner, holder.token)
    lease = await store.leases.revoke(root, engine_owner(workflow_id.split("/", 1)[0]), ENGINE_TTL)
    return lease.fence
