"""What a run saves at each safe point: blocks, steps and the checkpoint it resumes from."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from steadyrun.chat import Message, Usage
from steadyrun.records._call import CallRecord

__all__ = [
    "CHECKPOINT_FORMAT",
    "Block",
    "Checkpoint",
    "ContextChange",
    "RunRecord",
    "RunSnapshot",
    "RunStatus",
    "Step",
]

CHECKPOINT_FORMAT = 1
"""Version of ``Checkpoint``. History: 1: first format."""

RunStatus = Literal["running", "suspended", "completed", "failed", "cancelled"]
"""A run's status. ``running`` is also what a crashed run is left as until it is resumed;
``cancelled`` is final (``Operations.cancel``): the runtime refuses to resume such a run."""


@dataclass(kw_only=True, slots=True)
class Block:
    """One piece of the run's process, in model order.

    Attributes:
        id: Unique within the run.
        kind: ``thinking``, ``content`` (text), ``tool_call``, or ``input`` (a message the run
            took from its feed into the context: its first input, a steering message, a
            host's notice).
        position: Order of the block in the run.
        text: The text (thinking, content or input); empty for tool calls.
        call_id: The record id of the call, for ``tool_call`` blocks.
        model_call_id: The model call that produced the block (empty for input).
        turn: The turn the block belongs to.
        role: ``user`` or ``system``, for input blocks.
        message_id: The feed message's id, for input blocks.
        by: Who sent the input (its ``steadyrun.by`` meta), when the sender said.
        at: When the block entered the run (the input was taken, the response admitted).
        usage: The usage of the block's model call, on the call's first block only.

    Blocks stored before ``role``, ``message_id``, ``by``, ``at`` and ``usage`` existed read
    them as ``None``.
    """

    id: str
    kind: Literal["thinking", "content", "tool_call", "input"]
    position: int
    text: str = ""
    call_id: str | None = None
    model_call_id: str = ""
    turn: int = 0
    role: str | None = None
    message_id: str | None = None
    by: str | None = None
    at: datetime | None = None
    usage: Usage | None = None


@dataclass(kw_only=True, slots=True)
class Checkpoint:
    """The small state a run resumes from, besides its context log and call records.

    Its size does not grow with the number of steps: the model context lives in the
    append-only context log, the calls in their records.

    Attributes:
        format: ``CHECKPOINT_FORMAT`` when written; readers refuse other values.
        phase: Where the run stands: ``model`` (next: a model call), ``batch`` (a batch of
            calls is open), ``done`` (the turn ended).
        turn: Turns started so far.
        iteration: Model calls in the current turn.
        model_calls: Model calls of the run, which numbers them.
        corrections: Corrections used.
        claimed_through: The feed boundary claimed so far.
        batch: Record ids of the open batch, in call order.
        next_position: Position of the next block.
        context_length: Messages in the context log; a check on resume.
        seen_inputs: ``FeedMessage.key`` of the input messages taken since the current (or
            last) turn began (the ``(id, revision)`` pair as one text). Input at or below
            ``claimed_through`` is never taken again, so the keys of earlier turns are dropped
            when a turn begins: the list does not grow with the conversation. (Checkpoints
            written before kept every key; they read the same, and are trimmed at their next
            turn.)
        extra: State of extensions and later features, by name.
    """

    format: int = CHECKPOINT_FORMAT
    phase: Literal["model", "batch", "done"] = "model"
    turn: int = 0
    iteration: int = 0
    model_calls: int = 0
    corrections: int = 0
    claimed_through: int = 0
    batch: list[str] = field(default_factory=list)
    next_position: int = 0
    context_length: int = 0
    seen_inputs: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, slots=True)
class ContextChange:
    """How the model context changed since the last save.

    Attributes:
        base: When set, the context was rewritten: these messages replace the whole log.
        append: Messages appended after the (possibly new) base.
        start: Position in the log of the first appended message. Stores write the appended
            messages at their positions (dropping anything already at or after ``start``), so
            saving the same step twice does not add them twice. ``None``: after the log's end.
    """

    base: list[Message] | None = None
    append: list[Message] = field(default_factory=list)
    start: int | None = None


@dataclass(kw_only=True, slots=True)
class RunRecord:
    """A run's own row: who runs it, how it stands, how it ended.

    Attributes:
        run_id: The run.
        agent: The agent's name, used to find the agent again on resume.
        status: See ``RunStatus``.
        text: The final text, once completed.
        completion: The structured completion value, once completed with one.
        completion_reason: Why a fallback completion was used (``corrections_exhausted``,
            ``budget_exhausted``, ``guard_rejected``), when one was.
        error_kind: Class name of the ``RunFailure`` of a failed run.
        error: Message of that failure.
        usage: Token usage of the run so far.
        plan: The run's plan, where an extension keeps one.
        created_at: When the run started.
        updated_at: When it last saved.
        steps: Steps saved so far.
        agent_version: The fingerprint of the agent the run last ran under (see
            ``steadyrun.runtime.agent_fingerprint``); ``None`` for runs saved before it.
        cancelled_by: Who cancelled the run, when it was cancelled and the canceller said
            (``None`` otherwise, and in runs saved before it existed).
    """

    run_id: str
    agent: str
    status: RunStatus = "running"
    text: str | None = None
    completion: Any = None
    completion_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    plan: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    steps: int = 0
    agent_version: str | None = None
    cancelled_by: str | None = None


@dataclass(kw_only=True, slots=True)
class Step:
    """The changes of a run since its last save, written atomically.

    Stores apply removals first, then calls (by ``merge_call``), then blocks, the context
    change, the checkpoint and the run record.

    Attributes:
        run: The run's current row; replaces the stored one.
        checkpoint: The state to resume from; replaces the stored one.
        context: Context log change.
        blocks: New or changed blocks.
        calls: New or changed call records (complete snapshots).
        removed_blocks: Ids of removed blocks.
        removed_calls: Ids of removed calls.
    """

    run: RunRecord
    checkpoint: Checkpoint
    context: ContextChange = field(default_factory=ContextChange)
    blocks: list[Block] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    removed_blocks: list[str] = field(default_factory=list)
    removed_calls: list[str] = field(default_factory=list)


@dataclass(kw_only=True, slots=True)
class RunSnapshot:
    """Everything a store holds of one run, as loaded to resume or report it.

    Attributes:
        run: The run's row.
        checkpoint: The last saved checkpoint.
        context: The full model context (base plus appended messages).
        calls: Every call record, in id order of creation.
        blocks: Every block, by position.
    """

    run: RunRecord
    checkpoint: Checkpoint
    context: list[Message]
    calls: list[CallRecord]
    blocks: list[Block]

    def batch_calls(self) -> list[CallRecord]:
        """The calls of the open batch (``checkpoint.batch``), in call order.

        What a suspended run's open batch waits for (a decision, an input, a result) is among
        these: an approval screen reads them instead of every call of the run. A loaded
        snapshot decodes these calls alone.
        """
        by_id = {c.id: c for c in self.calls}
        return [by_id[i] for i in self.checkpoint.batch if i in by_id]
