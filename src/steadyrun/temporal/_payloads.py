"""What crosses Temporal's boundary: workflow input and output, activity inputs and outcomes.

Everything here is a dataclass of JSON-compatible values (Temporal's default converter); the
steadyrun types inside travel as the same plain data their stores keep (``to_plain``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_type_hints

from steadyrun._codec import from_plain, to_plain
from steadyrun.records import CallUpdate
from steadyrun.stores import FeedMessage

__all__ = [
    "ACTIVITY_CHILD_END",
    "ACTIVITY_LOAD",
    "ACTIVITY_MODEL",
    "ACTIVITY_RECORD",
    "ACTIVITY_TOOL",
    "WORKFLOW_NAME",
    "AnswerArgs",
    "Carried",
    "ChildEnd",
    "DecideArgs",
    "Loaded",
    "ModelCallInput",
    "RecordInput",
    "RecordOp",
    "RunInput",
    "RunOutput",
    "SendArgs",
    "SettleArgs",
    "ToolCallInput",
    "ToolOutcome",
    "update_from_plain",
    "update_to_plain",
]

WORKFLOW_NAME = "steadyrun.AgentWorkflow"
ACTIVITY_MODEL = "steadyrun.model"
ACTIVITY_TOOL = "steadyrun.tool"
ACTIVITY_RECORD = "steadyrun.record"
ACTIVITY_LOAD = "steadyrun.load"
ACTIVITY_CHILD_END = "steadyrun.subagent-end"


@dataclass(kw_only=True)
class Carried:
    """A run's state carried into a continued (continue-as-new) workflow run.

    Attributes:
        snapshot: The run's ``RunSnapshot`` as plain data (context log, calls, blocks, checkpoint).
        feed: The run's feed messages (``FeedMessage`` plain data), in order.
        consumed: The feed boundary already delivered.
        generation: How many times the run continued as new so far.
        feed_offset: Feed messages before ``feed`` that are not carried (a run restarted
            from the store carries only its unconsumed input; the earlier messages, all
            consumed, only keep the numbering the same as the store's).
        tasks: The background tasks that ended (``Task`` plain data), so the task tools
            still find them (none is going: the workflow does not continue as new then).
            A run restarted from the store gets those recorded there.
        children: Sub-agent child workflows whose delegation returned while their
            background tasks go on (child run id -> delegation tool name): the continued
            run takes their later turns (``SubagentTurn`` signals) and stays open for them.
        task_updates: The last progress updates of those tasks (``Update`` plain data), by
            task id (older payloads have none: their tasks show no progress).
        child_usage: Of ``children``, the usage (``Usage`` plain data) the run counted so far
            (their later turns add what they used since; older payloads have none).
    """

    snapshot: dict[str, Any]
    feed: list[dict[str, Any]]
    consumed: int
    generation: int
    feed_offset: int = 0
    tasks: list[dict[str, Any]] = field(default_factory=list)
    children: dict[str, str] = field(default_factory=dict)
    task_updates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    child_usage: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(kw_only=True)
class Loaded:
    """What the ``steadyrun.load`` activity read of a run in the app's store.

    Attributes:
        carried: The run's state, or ``None`` when the store has no such run.
    """

    carried: Carried | None = None


@dataclass(kw_only=True)
class RunInput:
    """The input of ``AgentWorkflow``.

    Attributes:
        agent: The agent's name, resolved in the worker's ``TemporalApp``.
        run_id: The run's id (the workflow id by convention).
        input: The first user message (a new run).
        input_id: Its id for deduplication; defaults to ``"<run_id>:input"``.
        carried: Set when the workflow continued as new.
        subagent: A sub-agent's run (a child workflow of a delegation): it never suspends,
            and its output carries its call records.
        resume: A run that exists: the workflow loads it from the app's store (its last
            saved step) and resumes it, taking ``input`` as new input (a new turn when the
            run had ended). ``agent`` may then be empty (the stored run names it). With
            ``subagent`` (delegations since ``steadyrun.subagent-takeover``) ``input`` is the
            task of a child the store lacks; a stored child goes on without it.
        cancel: With ``resume``, for a run whose workflow ended with the run failed: the
            workflow marks the run cancelled in the app's store (its open calls
            ``cancelled``) and ends with the output status ``cancelled``, as the built-in
            engine cancels a failed run (``TemporalRuns.cancel``).
        cancelled_by: With ``cancel``, who cancelled (``RunRecord.cancelled_by``).
        parent: With ``subagent``, the parent's workflow id when the parent takes a result
            signalled before the child workflow ends: the child then adopts background
            calls, signals its turn's result (``SubagentTurn``) when it ends with tasks
            going, and stays open, each task's ending a new turn signalled again.
            ``None`` (delegations started before ``steadyrun.subagent-background``): its
            background calls wait in the foreground and its result is its workflow's.
        shared: With ``subagent``, the parent's extension states when the delegation
            started (``save_state`` plain data, by name): the child runs with the parent's
            extensions in those states (``_wshared``). ``None`` (children started before
            ``steadyrun.subagent-extensions``): the child runs without extensions.
    """

    agent: str
    run_id: str
    input: str | None = None
    input_id: str | None = None
    carried: Carried | None = None
    subagent: bool = False
    resume: bool = False
    cancel: bool = False
    cancelled_by: str | None = None
    parent: str | None = None
    shared: dict[str, Any] | None = None


@dataclass(kw_only=True)
class RunOutput:
    """How a run ended, as the workflow returns it.

    Attributes:
        run_id: The run.
        status: ``completed`` or ``failed``; ``cancelled`` for a failed run cancelled after
            its workflow ended (``RunInput.cancel``).
        text: The final text of a completed run.
        completion: The structured completion value, if any (plain data).
        completion_reason: Why a fallback completion was used, if one was.
        error_kind: The ``RunFailure`` class name of a failed run.
        error: Its message.
        usage: Token usage (``Usage`` plain data).
        generations: How many times the workflow continued as new.
        calls: A sub-agent run's call records (``CallRecord`` plain data), copied under the
            delegation call by the parent.
        shared: A sub-agent run started with ``RunInput.shared``: the extensions' states
            when it ended, which the parent's instances take; in a ``SubagentTurn`` (since
            ``steadyrun.subagent-later-turns``) when that turn ended.
        usage: The run's usage over all its turns (``Usage`` plain data).
    """

    run_id: str
    status: str
    text: str | None = None
    completion: Any = None
    completion_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    generations: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)
    shared: dict[str, Any] | None = None


@dataclass(kw_only=True)
class SubagentTurn:
    """A sub-agent's turn that ended with background tasks going, or a later turn of it.

    Signalled by the child workflow to its parent (``SIGNAL_SUBAGENT_TURN``).

    Attributes:
        run_id: The child run (``<parent run>/<delegation call>``).
        turn: The child's turn that ended.
        first: The turn the delegation waits for (its result is the delegation's).
        going: Whether the child still has tasks going (it signals again when it has not).
        output: The turn's ``RunOutput`` (its ``calls``: the child's call records).
    """

    run_id: str
    turn: int
    first: bool
    going: bool
    output: RunOutput


SIGNAL_SUBAGENT_TURN = "subagent_turn"
"""The signal a sub-agent child workflow sends its parent (``SubagentTurn``)."""


@dataclass(kw_only=True)
class ChildEnd:
    """How a child workflow another run of its parent started ended (``steadyrun.subagent-end``).

    Attributes:
        output: Its ``RunOutput``, when it returned one.
        cancelled: It was cancelled.
        error: Otherwise why it ended without output (failed, terminated, timed out).
    """

    output: RunOutput | None = None
    cancelled: bool = False
    error: str | None = None


@dataclass(kw_only=True)
class ModelCallInput:
    """One model call, made by the ``steadyrun.model`` activity.

    Attributes:
        agent: The agent whose model answers.
        run_id: The run.
        model_call_id: ``m<n>``.
        request: The ``ModelRequest`` as plain data.
        purpose: ``turn`` (the agent's model) or ``summary`` (the context policy's summarizer).
    """

    agent: str
    run_id: str
    model_call_id: str
    request: dict[str, Any]
    purpose: Literal["turn", "summary"] = "turn"


@dataclass(kw_only=True)
class ToolCallInput:
    """One tool call body, run by the ``steadyrun.tool`` activity.

    Attributes:
        agent: The agent whose tool it is.
        run_id: The run.
        call_id: The record id.
        name: The tool.
        arguments: The raw argument JSON (validated again in the worker).
        provider_call_id: The provider's id of the call.
        can_suspend: Whether the call may suspend the run.
        answered: Whether this is a re-entry after ``require_input``.
        input_state: The state the tool gave with its input request.
        input_response: The validated answer.
        edited_arguments: Whether a reviewer edited the arguments.
        extensions: For a tool of an extension that does I/O: that extension's state
            (``save_state``), by name, so the body sees the run's instance; with ``wraps``,
            theirs too (and that of a deterministic extension whose tool it is).
        wraps: The I/O extensions whose ``wrap_tool`` runs around the body, outermost first
            (``steadyrun.temporal._extmw``).
        record: With ``wraps``: the call's record as it starts (``CallRecord`` plain data).
        subagent: Whether the run is a sub-agent's (its extensions' handles say so: ``Skills``
            lists a sub-agent no forked skill). Older inputs say ``False``.
    """

    agent: str
    run_id: str
    call_id: str
    name: str
    arguments: str
    provider_call_id: str = ""
    can_suspend: bool = True
    answered: bool = False
    input_state: Any = None
    input_response: Any = None
    edited_arguments: bool = False
    extensions: dict[str, Any] = field(default_factory=dict)
    wraps: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None
    subagent: bool = False


@dataclass(kw_only=True)
class ToolOutcome:
    """How a tool body ended in the worker; the workflow turns it into the record's next state.

    Attributes:
        kind: ``returned``, ``complete``, ``await``, ``detach``, ``input``, ``signal`` (another
            control signal), ``host_failure``, ``timeout``, ``cancelled``, ``error`` (the body
            raised), ``unrenderable`` (its value has no text or JSON form).
        text: The rendered result (``returned``, ``complete``), or a message.
        value: The value as plain data (completion tools), or a signal's payload.
        fixed: Whether a completion is fixed.
        receipt: A detached call's receipt.
        prompt: An input request's prompt.
        response_schema: An input request's schema.
        state: An input request's state.
        error_type: The exception or signal class name.
        usage: Usage of model calls the tool reported (``Usage`` plain data).
        media: Media the tool attached (``MediaRef`` plain data).
        extensions: The states of ``ToolCallInput.extensions`` after the body.
    """

    kind: str
    text: str | None = None
    value: Any = None
    fixed: bool = False
    receipt: str | None = None
    prompt: str | None = None
    response_schema: dict[str, Any] | None = None
    state: Any = None
    error_type: str | None = None
    usage: dict[str, Any] | None = None
    media: list[dict[str, Any]] = field(default_factory=list)
    extensions: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class RecordOp:
    """One write mirrored to the app's store.

    Attributes:
        op: ``save_step``, ``save_call``, ``update_call``, ``append``, ``consume`` or
            ``task`` (a background task that ended, for the app's task tables).
        data: The step, call, feed message or update as plain data (for ``task``:
            ``{"task": <Task>, "updates": [<Update>, ...]}``).
        call_id: The call of an ``update_call``.
        through: The boundary of a ``consume``.
    """

    op: str
    data: Any = None
    call_id: str | None = None
    through: int = 0


@dataclass(kw_only=True)
class RecordInput:
    """Writes of one run for the ``steadyrun.record`` activity, applied in order.

    Attributes:
        run_id: The run.
        ops: The writes.
    """

    run_id: str
    ops: list[RecordOp]


@dataclass(kw_only=True)
class DecideArgs:
    """A decision on a confirmation (update ``decide``).

    Attributes:
        call_id: The call.
        approve: Approve (runs once) or reject (never runs).
        reason: Shown to the model on rejection.
        arguments: Edited arguments (JSON text) with an approval.
        decided_by: Who decided.
    """

    call_id: str
    approve: bool
    reason: str | None = None
    arguments: str | None = None
    decided_by: str | None = None

    def decision(self) -> dict[str, Any]:
        """The keyword arguments of ``decide`` (``Runtime``'s, the workflow host's)."""
        return {
            "approve": self.approve,
            "reason": self.reason,
            "arguments": self.arguments,
            "decided_by": self.decided_by,
        }


@dataclass(kw_only=True)
class AnswerArgs:
    """An answer to an input request (update ``answer``).

    Attributes:
        wait_id: The request's wait id.
        response: The answer (validated against the request's schema).
        by: Who answered (``InputRequest.answered_by``).
    """

    wait_id: str
    response: Any = None
    by: str | None = None


@dataclass(kw_only=True)
class SettleArgs:
    """The outcome of a call the host owns (update ``settle``).

    Attributes:
        call_id: The call.
        result: Its result (it succeeded).
        error: Its error (it failed).
        by: Who recorded it (``CallRecord.settled_by``).
    """

    call_id: str
    result: str | None = None
    error: str | None = None
    by: str | None = None


@dataclass(kw_only=True)
class SendArgs:
    """Input for the run (update ``send``, signal ``input``).

    Attributes:
        id: The message id (deduplication with ``revision``).
        content: The text.
        revision: The revision.
        role: ``user`` or ``system``.
        meta: The message's meta (who sent it: ``steadyrun.by``).
    """

    id: str
    content: str
    revision: str = "1"
    role: Literal["user", "system"] = "user"
    meta: dict[str, str] | None = None

    def message(self) -> FeedMessage:
        """The feed message this input is."""
        return FeedMessage(
            id=self.id, revision=self.revision, role=self.role, content=self.content, meta=self.meta
        )


_UPDATE_TYPES: dict[str, Any] = {}


def _update_types() -> dict[str, Any]:
    if not _UPDATE_TYPES:
        _UPDATE_TYPES.update(get_type_hints(CallUpdate))
    return _UPDATE_TYPES


def update_to_plain(update: CallUpdate) -> dict[str, Any]:
    """The fields a host write sets, as plain data (unset fields are left out)."""
    unset = CallUpdate()
    types = _update_types()
    out: dict[str, Any] = {}
    for f in fields(CallUpdate):
        value = getattr(update, f.name)
        if value is getattr(unset, f.name):
            continue
        out[f.name] = to_plain(value, types[f.name])
    return out


def update_from_plain(data: dict[str, Any]) -> CallUpdate:
    """The host write ``update_to_plain`` described."""
    types = _update_types()
    return CallUpdate(**{name: from_plain(v, types[name]) for name, v in data.items()})
