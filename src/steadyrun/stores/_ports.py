"""The ports a run persists through: ``Journal`` (its records) and ``Feed`` (its input).

Both are small async protocols keyed by run id, so users can implement them on any database.
Every write is idempotent: writing the same thing twice leaves the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from steadyrun.chat import MediaRef
from steadyrun.records import CallRecord, CallUpdate, RunSnapshot, RunStatus, Step
from steadyrun.stores._leases import Leases

__all__ = ["Claim", "Feed", "FeedMessage", "Journal", "RunIndex", "RunSummary", "Store"]


@dataclass(kw_only=True, slots=True)
class FeedMessage:
    """One input message of a run.

    Attributes:
        seq: Position in the feed, assigned by the store on append (0 before).
        id: The host's message id. A message with the same ``id`` and ``revision`` (compared
            as a pair) as one already in the feed is not appended again.
        revision: Revision of the message; a new revision is a new input.
        role: ``user`` for conversation input, ``system`` for notices from the host.
        content: The text.
        media: Attached media, by reference.
        meta: Host data passed through untouched.
    """

    seq: int = 0
    id: str
    revision: str = "1"
    role: Literal["user", "system"] = "user"
    content: str
    media: list[MediaRef] = field(default_factory=list)
    meta: dict[str, str] | None = None

    @property
    def key(self) -> str:
        r"""The message's ``(id, revision)`` pair as one text, for runs to remember it by.

        ``id@revision`` with ``\`` and ``@`` in the id escaped by a backslash, so no two pairs
        share a key (``("a@b", "1")`` and ``("a", "b@1")`` would otherwise); for ids without
        either it is the plain ``id@revision`` of checkpoints written before. Stores
        deduplicate on the pair itself.
        """
        escaped = self.id.replace("\\", "\\\\").replace("@", "\\@")
        return f"{escaped}@{self.revision}"


@dataclass(kw_only=True, slots=True)
class Claim:
    """Input bound to a run.

    Attributes:
        end_seq: The boundary claimed.
        messages: Unconsumed messages up to ``end_seq``, in order.
    """

    end_seq: int
    messages: list[FeedMessage]


@runtime_checkable
class Feed(Protocol):
    """The durable input of runs.

    Contract: ``append`` numbers messages with increasing ``seq`` per run and returns the stored
    message (the existing one for a duplicate ``id``/``revision``). ``pending(after)`` returns the
    highest claimable ``seq`` above ``after`` or 0. ``claim(through)`` returns the unconsumed
    messages up to ``through``; claiming the same boundary again returns the same claim; claiming
    at or below the consumed boundary, or above the last message, raises ``StoreError``.
    ``consume(through)`` marks input delivered; it never moves backwards.
    """

    async def append(self, run_id: str, message: FeedMessage) -> FeedMessage:
        """Append input to a run's feed (idempotent by id and revision)."""
        ...

    async def pending(self, run_id: str, after: int) -> int:
        """The highest claimable sequence number above ``after``, or 0 when there is none."""
        ...

    async def claim(self, run_id: str, through: int) -> Claim:
        """Bind input up to ``through`` to the run."""
        ...

    async def consume(self, run_id: str, through: int) -> None:
        """Mark input up to ``through`` as delivered."""
        ...

    async def wait_pending(self, run_id: str, after: int, max_wait: float) -> int:
        """Wait up to ``max_wait`` seconds for claimable input above ``after``.

        Returns what ``pending(run_id, after)`` returns once there is input, or 0 when the
        wait ends without any.
        An append from this process or another wakes the waiter (notifications where the store
        has them); a lost notification is covered by polling, so it only delays the wake-up.
        """
        ...


@runtime_checkable
class Journal(Protocol):
    """Where a run's records live.

    Contract: ``save_step`` applies a ``Step`` atomically (removals, then calls merged with
    ``merge_call``, then blocks, the context change, checkpoint and run row). ``save_call``
    merges one call snapshot with ``merge_call`` and may run concurrently with other writes; a
    step carrying an older snapshot of a call must not undo a newer ``save_call``.
    ``update_call`` applies ``overlay_external`` to the stored record inside one write
    transaction (the record read and written under the same lock) and returns the result, so
    host answers are final: of two racing hosts one wins and the other gets the
    ``ConflictError`` (or ``NotPendingError``) ``overlay_external`` raises, and nothing changes
    for it. ``load`` returns everything needed to resume or report a run, or ``None``.

    ``save_step`` may also tell what the run's feed holds: it returns what
    ``pending(run_id, step.checkpoint.claimed_through)`` would return, read as part of the
    step's write (at or after the moment the step's transaction began), or ``None`` when the
    store does not tell; the runtime then reads ``pending`` itself before it needs to know. A
    step that leaves the run anything but ``running`` may answer ``None`` (its executor stops
    after it and asks nothing), where the answer would cost a statement of its own.
    """

    async def save_step(self, run_id: str, step: Step) -> int | None:
        """Write one step atomically.

        Returns:
            The highest claimable feed sequence number above the step's
            ``checkpoint.claimed_through`` (0 when there is none), or ``None`` when the store
            does not say (a store of your own may always return ``None``).
        """
        ...

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        """Merge one call snapshot."""
        ...

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        """Apply a host write to a call; raises ``CallNotFoundError`` for an unknown call.

        ``ConflictError`` and ``NotPendingError`` from ``overlay_external`` pass through.
        """
        ...

    async def load(self, run_id: str) -> RunSnapshot | None:
        """Load a run, or ``None`` when there is none."""
        ...

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """One call record (what host operations read), or ``None`` when there is none."""
        ...


@dataclass(kw_only=True, slots=True)
class RunSummary:
    """One line of a run listing.

    Attributes:
        run_id: The run.
        agent: Its agent's name.
        status: Its status.
        created_at: When it started.
        updated_at: When it last saved (its last activity).
        steps: Steps saved.
    """

    run_id: str
    agent: str
    status: RunStatus
    created_at: datetime | None
    updated_at: datetime | None
    steps: int


@runtime_checkable
class RunIndex(Protocol):
    """Listing runs, newest activity first."""

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        updated_before: datetime | None = None,
        limit: int = 100,
    ) -> list[RunSummary]:
        """Runs by last activity (newest first), filtered by status and agent.

        ``updated_before`` pages: pass the ``updated_at`` of the last run of the previous page
        (runs updated at that very instant and listed already may repeat).
        """
        ...


@runtime_checkable
class Store(Journal, Feed, RunIndex, Protocol):
    """A journal, a feed, a run index and the runs' claims in one, as every steadyrun store is.

    ``leases`` holds, per run, the claim of the one executor allowed to execute it (owner,
    fencing token, expiry) and the run's wake-ups; ``save_step`` and ``save_call`` check the
    current task's fence against it inside their transaction, and ``append``/``update_call``
    made outside the run's execution count a wake-up (see ``steadyrun.stores.Leases``).
    """

    @property
    def leases(self) -> Leases:
        """The runs' claims and wake-ups kept with this store."""
        ...

    async def close(self) -> None:
        """Release connections and threads; the store is not used after this."""
        ...
