"""The exceptions steadyrun raises.

Every error derives from one root, so ``except steadyrun.SteadyrunError`` catches them all::

    SteadyrunError
    ├── UsageError                 the library was called the wrong way; fix the calling code
    │   ├── ToolDefinitionError    a @tool signature or trait is invalid (all problems at once)
    │   ├── RunNotFoundError       no run is stored under that id
    │   ├── StepNotFoundError      no such step in a run's history (``steadyrun.runtime``)
    │   ├── RunCancelledError      the run was cancelled: it is never resumed
    │   ├── UnknownCallError       no call (or wait) with that id in the run
    │   │   └── CallNotFoundError  a store has no such call to update (also a ``KeyError``)
    │   ├── NotPendingError        the call is not waiting for that (late or duplicate answer)
    │   │   └── _RunEnded          a Temporal run ended: new input restarts it (private)
    │   │       └── _RunFailed     a Temporal run failed: resume continues it (private)
    │   ├── ConflictError          a different decision or answer was already given
    │   ├── InvalidResponseError   an answer or edited arguments fail their schema
    │   └── CommandLineError       the ``steadyrun`` command line is wrong (exit 2; private)
    ├── RunBusyError               another executor holds the run's claim (owner, expiry)
    │   └── ForeignEngineError     another engine (Temporal) executes the run: reach it there
    ├── StoreError                 a store failed to read or write; the last saved step is intact
    │   ├── FormatVersionError     stored data has a format version this release does not know
    │   ├── EngineUnavailableError the engine's cluster (Temporal) did not take the request
    │   └── LeaseLostError         the claim is another's now: write refused (``steadyrun.stores``)
    ├── ModelError                 a model client failed (providers add status and body)
    │   ├── ScriptExhaustedError   a ScriptedModel was asked for more responses than scripted
    │   ├── LocalBuildError        the installed llama.cpp cannot compute on this machine
    │   ├── StructuredOutputError  generate_object got no valid value within its attempts
    │   └── ProviderError          a provider answered with an error (``steadyrun.models``)
    │       ├── AuthenticationFailed   the API key is missing, wrong or lacks permission
    │       ├── BadRequest             the request was refused as malformed
    │       │   └── ContextOverflow    the request does not fit the context window
    │       ├── RateLimited            too many requests (retried)
    │       ├── Overloaded             the provider is overloaded (retried)
    │       ├── ServerError            the provider failed (retried)
    │       ├── ProviderTimeout        no answer in time (retried)
    │       ├── ProviderConnectionError  the connection failed (retried)
    │       └── MalformedResponse      the response does not have its documented shape
    ├── ToolArgumentsError         a tool call's arguments are invalid (``steadyrun.tools``)
    ├── SubAgentFailed             a sub-agent's run failed (``steadyrun.extensions``)
    ├── McpError                   an MCP server failed (``steadyrun.extensions.mcp``)
    │   └── McpToolError           an MCP tool reported an error
    ├── NotSupportedError          not available in this release (``steadyrun.service``)
    ├── SequenceGapError           a delta does not follow its snapshot (``steadyrun.stream``)
    ├── DevServerError             the Temporal dev server failed (``steadyrun.temporal``)
    └── RunFailure                 why a run ended ``failed``; stored with the run
        ├── ModelCallFailed        the model call raised
        ├── InvalidModelOutput     the model answered in a way the loop cannot admit
        ├── ContentFiltered        the provider filtered the response
        ├── LimitExceeded          a Limits bound was reached
        │   ├── IterationLimitExceeded
        │   ├── TurnLimitExceeded
        │   └── BudgetExceeded     a usage budget (``Limits.budget``, ``turn_budget``) is used up
        ├── CorrectionsExhausted   the model used up its corrections
        └── SubAgentInterrupted    a sub-agent run its parent's recovery ended (unknown effect)

An error whose line names a ``steadyrun.…`` package is imported from there, and so are its
subclasses; the others from ``steadyrun``.

Signals are not errors and do not derive from this tree: the control flow tools raise
(``steadyrun.control``: ``ControlSignal`` and its ``AwaitExternal``, ``Detach``,
``InputRequired``, ``Complete``), ``HostFailure`` (a tool cannot tell whether its effect
happened) and ``CallRejected`` (a host refuses a handover), all caught by the runtime; and
``CheckSkipped``, which a conformance check raises for the test runner.
"""

from __future__ import annotations

from datetime import datetime

__all__ = [
    "BudgetExceeded",
    "CallNotFoundError",
    "ConflictError",
    "ContentFiltered",
    "CorrectionsExhausted",
    "EngineUnavailableError",
    "ForeignEngineError",
    "FormatVersionError",
    "InvalidModelOutput",
    "InvalidResponseError",
    "IterationLimitExceeded",
    "LimitExceeded",
    "LocalBuildError",
    "ModelCallFailed",
    "ModelError",
    "NotPendingError",
    "RunBusyError",
    "RunCancelledError",
    "RunFailure",
    "RunNotFoundError",
    "ScriptExhaustedError",
    "SteadyrunError",
    "StepNotFoundError",
    "StoreError",
    "SubAgentInterrupted",
    "ToolDefinitionError",
    "TurnLimitExceeded",
    "UnknownCallError",
    "UsageError",
    "failure_from_record",
]


class SteadyrunError(Exception):
    """Root of every error steadyrun raises."""


class UsageError(SteadyrunError):
    """The library was used the wrong way; the message says what to change."""


class ToolDefinitionError(UsageError):
    """A tool definition is invalid.

    Attributes:
        problems: Every problem found, so all of them can be fixed in one go.
    """

    def __init__(self, tool_name: str, problems: list[str]) -> None:
        self.tool_name = tool_name
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"tool {tool_name!r} has {len(self.problems)} problem(s):\n{lines}")


class RunNotFoundError(UsageError):
    """No run is stored under the given id."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run with id {run_id!r} in this store; start it with Runtime.run()")


class StepNotFoundError(UsageError):
    """A run's history lists no step with that number (to fork from, say).

    Attributes:
        run_id: The run.
        step: The step asked for.
        detail: What the history holds instead, when that helps.
    """

    def __init__(self, run_id: str, step: int, detail: str = "") -> None:
        self.run_id = run_id
        self.step = step
        self.detail = detail
        message = f"run {run_id!r} has no step {step} in its history"
        super().__init__(f"{message}: {detail}" if detail else message)

    def __reduce__(self) -> tuple[type[StepNotFoundError], tuple[str, int, str]]:
        return (type(self), (self.run_id, self.step, self.detail))


class RunCancelledError(UsageError):
    """The run was cancelled; a cancelled run is never resumed (continue it in a new run)."""


class UnknownCallError(UsageError):
    """The run has no call (or no wait) with the given id."""


class CallNotFoundError(UnknownCallError, KeyError):
    """A store has no call with that id in that run (or no such run) to update.

    Also a ``KeyError``, as stores raised before it existed, so ``except KeyError`` still
    catches it.

    Attributes:
        run_id: The run.
        call_id: The call.
    """

    def __init__(self, run_id: str, call_id: str) -> None:
        self.run_id = run_id
        self.call_id = call_id
        super().__init__(f"no call {call_id!r} in run {run_id!r}")

    # KeyError would show the message quoted, as a repr.
    __str__ = Exception.__str__

    def __reduce__(self) -> tuple[type[CallNotFoundError], tuple[str, str]]:
        return (type(self), (self.run_id, self.call_id))


class NotPendingError(UsageError):
    """The call is not waiting for what was given: a late, duplicate or misdirected answer.

    Nothing was changed.
    """


class ConflictError(UsageError):
    """A different decision or answer was already recorded; decisions are final."""


class InvalidResponseError(UsageError):
    """An answer, or arguments edited by a reviewer, do not satisfy their schema.

    Nothing was stored; the message says what is wrong.
    """


class RunBusyError(SteadyrunError):
    """Another executor holds the run's claim: it executes the run now.

    One run is executed by at most one executor at a time, whatever the process or path. Wait
    for the holder (``Runtime.resume(run_id, wait=...)``), or give the run input with
    ``send`` (the holder takes it at its next safe point).

    Attributes:
        run_id: The run.
        owner: The executor holding the claim.
        expires_at: When the claim lapses unless its holder renews it (UTC), if known.
    """

    def __init__(self, run_id: str, owner: str, expires_at: datetime | None) -> None:
        self.run_id = run_id
        self.owner = owner
        self.expires_at = expires_at
        until = f" until {expires_at.isoformat()} unless renewed" if expires_at else ""
        super().__init__(
            f"run {run_id!r} is executing in {owner!r} (its claim holds{until}); wait for it "
            "with resume(run_id, wait=...) or give it input with send()"
        )

    def __reduce__(self) -> tuple[type[RunBusyError], tuple[str, str, datetime | None]]:
        return (type(self), (self.run_id, self.owner, self.expires_at))


class ForeignEngineError(RunBusyError):
    """The run is executed by another engine (Temporal): this one neither runs nor writes it.

    Its workflow holds the run's claim in the store for good; decisions, answers, results,
    input and cancels go to the workflow (``steadyrun.temporal.TemporalRuns``), never into
    the store where nothing would act on them.

    Attributes:
        engine: The engine executing the run (``temporal``).
    """

    def __init__(self, run_id: str, owner: str, expires_at: datetime | None = None) -> None:
        super().__init__(run_id, owner, expires_at)
        self.engine = owner.split(":")[1] if owner.count(":") >= 2 else owner
        self.args = (
            f"run {run_id!r} is executed by the {self.engine} engine ({owner}); this engine "
            "does not run or write it: reach it through that engine (for Temporal: "
            "TemporalRuns.decide/answer/settle/send/cancel)",
        )


class StoreError(SteadyrunError):
    """A store failed to read or write. The last step saved before the failure stays intact."""


class EngineUnavailableError(StoreError):
    """The engine that executes the run (a Temporal cluster) did not take the request.

    Raised by ``steadyrun.temporal.TemporalRuns`` when Temporal's frontend cannot be reached
    or refuses a call for a reason of its own (unavailable, deadline exceeded, permission
    denied, resource exhausted): the engine's counterpart of a store failing, so the service
    answers it 503 and the CLI exits with its message. Whether a write reached the run is not
    known: ask again (a repeated decision, answer, result or message id changes nothing).
    The ``temporalio`` ``RPCError`` is the exception's ``__cause__``.

    Attributes:
        status: The RPC status name (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``...).
    """

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[type[EngineUnavailableError], tuple[str, str]]:
        return (type(self), (str(self), self.status))


class FormatVersionError(StoreError):
    """Stored data carries a format version this release cannot read."""

    def __init__(self, what: str, found: object, known: object) -> None:
        self.what = what
        self.found = found
        self.known = known
        super().__init__(
            f"{what} has format version {found!r}, this release reads {known!r}; "
            "upgrade steadyrun to read it"
        )


class ModelError(SteadyrunError):
    """A model client failed to produce a response."""


class ScriptExhaustedError(ModelError):
    """A scripted model was asked for a response after its script ran out."""


class LocalBuildError(ModelError):
    """The installed llama.cpp (``llama-cpp-python``) crashed or failed a tiny computation.

    ``LocalModel`` checks this in a subprocess before loading a model; the message names the
    cause (a signal such as SIGILL, or an exit status, and the end of the child's stderr) and
    the command that rebuilds llama.cpp portably.

    Attributes:
        returncode: The check's exit status; negative: killed by that signal (``-4``: SIGILL).
        stderr: What the check printed to stderr.
    """

    def __init__(self, message: str, returncode: int, stderr: str = "") -> None:
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(message)

    def __reduce__(self) -> tuple[type[LocalBuildError], tuple[str, int, str]]:
        return (type(self), (str(self), self.returncode, self.stderr))


class RunFailure(SteadyrunError):
    """Why a run ended with status ``failed``.

    Instances are stored with the run (by class name and message) and come back on
    ``RunResult.error`` after a reload.
    """


class ModelCallFailed(RunFailure):
    """The model call raised; resume the run to try again from the last checkpoint."""


class InvalidModelOutput(RunFailure):
    """The model's response cannot be admitted (for example tool calls with finish ``stop``)."""


class ContentFiltered(RunFailure):
    """The provider stopped the response with a content filter."""


class LimitExceeded(RunFailure):
    """A bound of ``Limits`` was reached."""


class IterationLimitExceeded(LimitExceeded):
    """The turn made ``Limits.max_iterations`` model calls without finishing."""


class TurnLimitExceeded(LimitExceeded):
    """The run would start more than ``Limits.max_turns`` turns."""


class BudgetExceeded(LimitExceeded):
    """A usage budget is used up: the run makes no further model call until it is raised.

    The run is suspended (or failed, with ``Limits(on_budget="fail")``); raise the budget
    (``Runtime.raise_budget``, or the agent's ``Limits``) and resume it.

    Attributes:
        scope: ``run`` (``Limits.budget``) or ``turn`` (``Limits.turn_budget``).
        measure: What ran out: ``requests``, ``input_tokens``, ``output_tokens``,
            ``total_tokens``, ``tool_calls`` or ``cost`` (a field of ``Budget``).
        limit: The budget's limit.
        used: What the run (or its turn) had used when it was checked.
    """

    def __init__(
        self,
        message: str,
        *,
        scope: str = "",
        measure: str = "",
        limit: float | None = None,
        used: float | None = None,
    ) -> None:
        self.scope = scope
        self.measure = measure
        self.limit = limit
        self.used = used
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword attributes do not survive the default pickling of an exception.
        return (_budget_exceeded, (str(self), self.scope, self.measure, self.limit, self.used))


def _budget_exceeded(
    message: str, scope: str, measure: str, limit: float | None, used: float | None
) -> BudgetExceeded:
    return BudgetExceeded(message, scope=scope, measure=measure, limit=limit, used=used)


class CorrectionsExhausted(RunFailure):
    """The model needed more corrections than ``Limits.corrections`` allows."""


class SubAgentInterrupted(RunFailure):
    """A sub-agent run that its parent's recovery ended instead of resuming.

    The process died while the sub-agent ran a call with side effects: that call's outcome is
    unknown, so the delegation needs review, the call is ``needs_review`` here too, and the
    sub-agent is not continued (its queued calls are ``cancelled``).
    """


_FAILURES: dict[str, type[RunFailure]] = {
    cls.__name__: cls
    for cls in (
        RunFailure,
        ModelCallFailed,
        InvalidModelOutput,
        ContentFiltered,
        LimitExceeded,
        IterationLimitExceeded,
        TurnLimitExceeded,
        BudgetExceeded,
        CorrectionsExhausted,
        SubAgentInterrupted,
    )
}


def failure_from_record(kind: str, message: str) -> RunFailure:
    """Rebuild a stored run failure; an unknown kind (a newer release's) becomes ``RunFailure``."""
    return _FAILURES.get(kind, RunFailure)(message)
