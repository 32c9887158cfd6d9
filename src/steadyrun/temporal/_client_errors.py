"""The typed errors ``TemporalRuns`` raises for Temporal's answers (split from ``_client``)."""

from __future__ import annotations

from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from steadyrun import _errors
from steadyrun._errors import NotPendingError, RunCancelledError, RunNotFoundError, SteadyrunError

# The two classes keep their private names: the error tree draws them so (steadyrun._errors).
__all__ = [
    "_RunEnded",
    "_RunFailed",
    "cancelled",
    "named",
    "not_found",
    "typed",
    "typed_cause",
]


class _RunEnded(NotPendingError):
    """The run's workflow ended with the run (completed or failed): new input restarts it."""


class _RunFailed(_RunEnded):
    """The run's workflow ended with the run failed (or was terminated, or timed out)."""


def cancelled(run_id: str) -> RunCancelledError:
    return RunCancelledError(
        f"run {run_id!r} was cancelled; it is not resumed and takes no input (start a new run "
        "with TemporalRuns.start)"
    )


def not_found(run_id: str) -> RunNotFoundError:
    error = RunNotFoundError(run_id)
    # Its own message points at Runtime.run, which would not reach Temporal.
    error.args = (
        f"no run with id {run_id!r} on Temporal (no workflow with that id in this client's "
        "namespace); start it with TemporalRuns.start()",
    )
    return error


def typed(exc: WorkflowUpdateFailedError) -> Exception:
    """The steadyrun error a refused update carries (its type name), or the Temporal error."""
    return typed_cause(exc.cause) or exc


def typed_cause(cause: BaseException | None) -> Exception | None:
    """The steadyrun error an ``ApplicationError`` names by its type, if it names one."""
    if isinstance(cause, ApplicationError) and cause.type:
        return named(cause.type, cause.message)
    return None


def named(kind: str, message: str) -> Exception | None:
    """The steadyrun error whose type is named ``kind``, with ``message``, if there is one."""
    cls = getattr(_errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, SteadyrunError):
        return cls(message)
    return None
