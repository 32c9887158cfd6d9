"""What executes an ``App``'s runs: the ``Engine`` protocol and the built-in engine.

An ``App`` does its host operations (start, resume, send, decide, answer, settle, fork,
cancel, delete) through its engine. ``BuiltinEngine`` (the default, in
``steadyrun.service._builtin``) records them in the store, where the app's embedded worker
or any other ``steadyrun worker`` takes them up; ``steadyrun.temporal.TemporalEngine``
sends them to the runs' workflows. Either way the runs are read from the store (the
Temporal workflows record their steps there), so the page, the display stream and the
listings do not depend on the engine.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from steadyrun._errors import NotPendingError, RunCancelledError, RunNotFoundError
from steadyrun.background import Task
from steadyrun.chat import Message
from steadyrun.records import CallRecord, RunSnapshot
from steadyrun.runtime import ForkedRun, Runtime
from steadyrun.service._lifecycle import Deleted
from steadyrun.service._start import Cancelled, Started
from steadyrun.stores import FeedMessage, Store

__all__ = ["Engine", "Host"]


class Host(Protocol):
    """What an engine is bound to: an ``App`` or ``Operations`` (a runtime on a store)."""

    runtime: Runtime
    store: Store


@runtime_checkable
class Engine(Protocol):
    """Executes runs and takes their host operations (see the module).

    Errors are steadyrun's typed errors whatever the engine (the HTTP API maps them to the
    same statuses): ``RunNotFoundError``, ``NotPendingError``, ``RunCancelledError``,
    ``ConflictError``, ``UnknownCallError``, ``InvalidResponseError``, ``UsageError``.
    """

    name: str
    """``builtin`` or ``temporal``."""

    def bind(self, host: Host) -> None:
        """Attach to the app (or ``Operations``) whose runs it executes; once."""
        ...

    async def open(self) -> None:
        """Start executing runs here (an embedded worker), if the engine does."""
        ...

    async def close(self, grace: float = 10.0) -> None:
        """Stop executing runs here, giving executions ``grace`` seconds."""
        ...

    def executing(self, run_id: str) -> bool:
        """Whether the run executes in this process now."""
        ...

    async def wait(self, run_id: str) -> None:
        """Wait until the run is at rest: nothing executes it, nothing makes it go on."""
        ...

    async def start(
        self, run_id: str, agent: str, input: str, *, fingerprint: str, meta: dict[str, str]
    ) -> Started:
        """Start a run idempotently (the same fingerprint again: the same run)."""
        ...

    async def resume(self, run_id: str) -> bool:
        """Make a run go on; ``False`` when it executes here already."""
        ...

    async def send(
        self, run_id: str, text: str, *, id: str | None, revision: str | None, by: str | None
    ) -> FeedMessage:
        """Input for a run (a new turn for a completed one)."""
        ...

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None,
        arguments: dict[str, Any] | None,
        decided_by: str | None,
        by: str | None,
    ) -> CallRecord:
        """Approve or reject a call waiting for a decision."""
        ...

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None
    ) -> CallRecord:
        """Answer an input request."""
        ...

    async def settle(
        self,
        run_id: str,
        call_id: str,
        *,
        result: str | None,
        error: str | None,
        by: str | None,
    ) -> CallRecord:
        """Record the outcome of a call the host owns."""
        ...

    async def fork(
        self, run_id: str, *, at: int, new_run_id: str, edit: Message | str | None, resume: bool
    ) -> ForkedRun:
        """Fork a run at a step into a new run."""
        ...

    async def cancel(self, run_id: str, *, by: str | None) -> Cancelled:
        """Cancel a run tree; empty ``runs`` when it was cancelled before."""
        ...

    async def delete(self, run_id: str) -> Deleted:
        """Delete a run tree that nothing executes now (``RunBusyError`` while something does)."""
        ...

    async def tasks(self, run_id: str) -> list[Task]:
        """The run's background tasks, oldest first (none when the run has none)."""
        ...

    async def continued(self, run_id: str) -> None:
        """A successor run was written to the store with its input: make it go."""
        ...


def resumable(run_id: str, snap: RunSnapshot | None, *, executing: bool = False) -> RunSnapshot:
    """The run's snapshot, when the service may resume it; else the refusal every engine gives.

    ``executing``: the run executes here now, so a ``completed`` status is not its last word.

    Raises:
        RunNotFoundError: No such run.
        RunCancelledError: It was cancelled.
        NotPendingError: It completed: there is nothing to resume.
    """
    if snap is None:
        raise RunNotFoundError(run_id)
    if snap.run.status == "cancelled":
        raise RunCancelledError(f"run {run_id!r} was cancelled; it is not resumed")
    if snap.run.status == "completed" and not executing:
        raise NotPendingError(
            f"run {run_id!r} completed: there is nothing to resume; send it a message to go on"
        )
    return snap
