"""What a display shows of a run (``DisplaySnapshot``), its changes (``Delta``) and ``apply``.

Snapshots are immutable: tuples of frozen dataclasses. ``apply`` returns a new snapshot and
never changes its arguments (values of type ``Any``, such as a plan or a schema, are shared,
never modified).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from steadyrun._errors import SteadyrunError
from steadyrun.chat import Usage
from steadyrun.records._copy import copied

__all__ = [
    "BlockAdded",
    "BlockRemoved",
    "BlockUpdated",
    "CallRemoved",
    "CallStatusChanged",
    "Delta",
    "DisplayBlock",
    "DisplayCall",
    "DisplayDecision",
    "DisplayInput",
    "DisplayPending",
    "DisplaySnapshot",
    "PendingChanged",
    "PlanChanged",
    "RunStatusChanged",
    "SequenceGapError",
    "Fragment",
    "TextFragment",
    "ThinkingFragment",
    "ToolArgumentsFragment",
    "UsageChanged",
    "apply",
    "coalesce",
]


class SequenceGapError(SteadyrunError):
    """A delta does not follow the snapshot it is applied to (its ``seq`` is not the next one).

    A client that sees it missed deltas: it asks for a fresh snapshot.
    """


@dataclass(frozen=True, kw_only=True, slots=True)
class DisplayBlock:
    """One block of the run's timeline.

    Attributes:
        id: The block id (unique within the run).
        kind: ``thinking``, ``content`` (text), ``tool_call``, or ``input`` (a message the run
            took in: its input, a steering message, a host's notice).
        position: Order in the run.
        text: The text of thinking, content and input blocks.
        call_id: The call of a ``tool_call`` block.
        turn: The turn the block belongs to.
        live: A block of the model call being streamed now: its text grows with the
            model's fragments (a ``tool_call`` block's text is the arguments typed so far)
            and it is replaced by the stored blocks once the response is saved, or removed
            when the call is lost (a crash: the model is asked again).
        name: The tool of a live ``tool_call`` block.
        model_call_id: The model call that produced it (empty for input and live blocks).
        role: ``user`` or ``system``, for input blocks.
        message_id: The input message's id.
        by: Who sent the input, when the sender said.
        at: When the block entered the run (``None`` for blocks stored before it was kept).
        usage: The usage of the block's model call, on the call's first block only.
    """

    id: str
    kind: Literal["thinking", "content", "tool_call", "input"]
    position: int
    text: str = ""
    call_id: str | None = None
    turn: int = 0
    live: bool = False
    name: str | None = None
    model_call_id: str = ""
    role: str | None = None
    message_id: str | None = None
    by: str | None = None
    at: datetime | None = None
    usage: Usage | None = None

    @property
    def order(self) -> tuple[int, str]:
        """The sort key of blocks in a snapshot."""
        return (self.position, self.id)


@dataclass(frozen=True, kw_only=True, slots=True)
class DisplayDecision:
    """A person's decision on a call, as shown.

    Attributes:
        approve: Approved or rejected.
        reason: Why.
        decided_by: Who decided.
        edited: Whether the arguments were edited.
        arguments: The edited arguments (JSON text) the call runs with, when edited.
        original_arguments: The model's own arguments (JSON text), when edited.
        decided_at: When.
    """

    approve: bool
    reason: str | None = None
    decided_by: str | None = None
    edited: bool = False
    arguments: str | None = None
    original_arguments: str | None = None
    decided_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DisplayInput:
    """A call's request for input and its answer, kept after the answer.

    Attributes:
        wait_id: The wait an answer names.
        prompt: What was asked.
        response_schema: The JSON schema of the answer.
        response: The answer, once given.
        answered: Whether an answer was given (a ``None`` answer is one).
        answered_by: Who answered.
        answered_at: When.
    """

    wait_id: str
    prompt: str
    response_schema: dict[str, Any] | None = None
    response: Any = None
    answered: bool = False
    answered_by: str | None = None
    answered_at: datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DisplayCall:
    """A tool call and its status.

    Attributes:
        id: The record id.
        name: The tool.
        arguments: The arguments (JSON text).
        status: The call's status (``queued``, ``running``, ``succeeded``...).
        result: The model-visible result (shortened when long).
        error: The model-visible error.
        handover: Who advances it besides the runtime (``await``, ``detached``, ``submitted``).
        parent_id: The delegation this call belongs to, in a sub-agent.
        decision: The decision on it, once one is written.
        model_call_id: The model call that asked for it.
        started_at: When its body started.
        completed_at: When it settled.
        settled_by: Who recorded its outcome, when the host did (an awaited result, a
            needs-review call acknowledged).
        input: Its request for input and the answer, when it asked.
        prompt: The question its approval asked (kept after the decision).
    """

    id: str
    name: str
    arguments: str = "{}"
    status: str = "queued"
    result: str | None = None
    error: str | None = None
    handover: str = ""
    parent_id: str | None = None
    decision: DisplayDecision | None = None
    model_call_id: str = ""
    started_at: datetime | None = None
    completed_at: datetime | None = None
    settled_by: str | None = None
    input: DisplayInput | None = None
    prompt: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DisplayPending:
    """Something the run waits for, or that its host owns (see ``Runtime.pending``).

    Attributes:
        kind: ``decision``, ``input``, ``result``, ``review``, ``submission`` or ``detached``.
        blocking: Whether the run waits for it.
        call_id: The call.
        name: The tool.
        arguments: The call's arguments (JSON text).
        prompt: What to ask (decisions and inputs).
        wait_id: What to ``answer`` an input request with.
        response_schema: The JSON schema of an input's answer.
        payload: What the tool or policy handed over.
    """

    kind: str
    blocking: bool
    call_id: str
    name: str
    arguments: str = "{}"
    prompt: str | None = None
    wait_id: str | None = None
    response_schema: dict[str, Any] | None = None
    payload: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DisplaySnapshot:
    """Everything a display shows of one run at sequence number ``seq``.

    Attributes:
        run_id: The run.
        agent: Its agent's name.
        status: ``running``, ``suspended``, ``completed`` or ``failed``.
        text: The final text of a completed run.
        error: Why a failed run failed.
        usage: Token usage so far.
        plan: The run's plan (the ``planning`` extension's), or ``None``.
        blocks: The timeline, ordered by ``(position, id)``.
        calls: The calls, in order of creation.
        pending: What the run waits for and what its host owns.
        seq: The sequence number of the last delta applied (0 for a first snapshot).
        cancelled_by: Who cancelled the run, when it was cancelled and the canceller said.
    """

    run_id: str
    agent: str = ""
    status: str = "running"
    text: str | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    plan: Any = None
    blocks: tuple[DisplayBlock, ...] = ()
    calls: tuple[DisplayCall, ...] = ()
    pending: tuple[DisplayPending, ...] = ()
    seq: int = 0
    cancelled_by: str | None = None

    def block(self, block_id: str) -> DisplayBlock | None:
        """The block with this id, or ``None``."""
        return next((b for b in self.blocks if b.id == block_id), None)

    def call(self, call_id: str) -> DisplayCall | None:
        """The call with this id, or ``None``."""
        return next((c for c in self.calls if c.id == call_id), None)

    def normalized(self) -> DisplaySnapshot:
        """The same snapshot with its blocks in canonical order (what ``apply`` keeps).

        The snapshot itself when they are in that order already (it is frozen): a block is
        nearly always added at the end, and a service normalizes at every change of a run.
        """
        keys = [b.order for b in self.blocks]
        if all(a < b for a, b in zip(keys, keys[1:], strict=False)):
            return self
        return copied(self, blocks=tuple(sorted(self.blocks, key=lambda b: b.order)))


# -- deltas ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStatusChanged:
    """The run's status (and final text or error, and who cancelled it) changed."""

    kind: Literal["run_status"] = "run_status"
    seq: int
    status: str
    text: str | None = None
    error: str | None = None
    cancelled_by: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockAdded:
    """A block joined the timeline (with its whole text when it arrived at once)."""

    kind: Literal["block_added"] = "block_added"
    seq: int
    block: DisplayBlock


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockUpdated:
    """A block was replaced (its text rewritten, or moved)."""

    kind: Literal["block_updated"] = "block_updated"
    seq: int
    block: DisplayBlock


@dataclass(frozen=True, kw_only=True, slots=True)
class BlockRemoved:
    """A block left the timeline (a correction that does not stay in the history)."""

    kind: Literal["block_removed"] = "block_removed"
    seq: int
    block_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TextFragment:
    """More text of a content block, appended to it.

    ``first_seq`` is set when the fragment stands for several joined ones (a follower that
    lagged gets them as one): it covers ``first_seq`` to ``seq``.
    """

    kind: Literal["text_fragment"] = "text_fragment"
    seq: int
    block_id: str
    text: str
    first_seq: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingFragment:
    """More text of a thinking block, appended to it (``first_seq``: see ``TextFragment``)."""

    kind: Literal["thinking_fragment"] = "thinking_fragment"
    seq: int
    block_id: str
    text: str
    first_seq: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolArgumentsFragment:
    """More of a live tool call's arguments as the model types them.

    ``first_seq``: see ``TextFragment``.
    """

    kind: Literal["arguments_fragment"] = "arguments_fragment"
    seq: int
    block_id: str
    text: str
    first_seq: int | None = None


Fragment = TextFragment | ThinkingFragment | ToolArgumentsFragment
"""The deltas that append text to a block."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallStatusChanged:
    """A call appeared or changed (its whole display record; added at the end when new).

    Its ``kind`` is ``call_status`` (the name the stream and the web page know it by).
    """

    kind: Literal["call_status"] = "call_status"
    seq: int
    call: DisplayCall


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRemoved:
    """A call left the run's records."""

    kind: Literal["call_removed"] = "call_removed"
    seq: int
    call_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanChanged:
    """The run's plan changed."""

    kind: Literal["plan"] = "plan"
    seq: int
    plan: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageChanged:
    """The run's token usage changed (the new totals)."""

    kind: Literal["usage"] = "usage"
    seq: int
    usage: Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingChanged:
    """What the run waits for changed (the whole new list)."""

    kind: Literal["pending"] = "pending"
    seq: int
    items: tuple[DisplayPending, ...] = ()


Delta = Annotated[
    RunStatusChanged
    | BlockAdded
    | BlockUpdated
    | BlockRemoved
    | TextFragment
    | ThinkingFragment
    | ToolArgumentsFragment
    | CallStatusChanged
    | CallRemoved
    | PlanChanged
    | UsageChanged
    | PendingChanged,
    Field(discriminator="kind"),
]
"""One change of a display snapshot; ``kind`` tells which."""


# -- apply -----------------------------------------------------------------------------------


def apply(snapshot: DisplaySnapshot, delta: Delta) -> DisplaySnapshot:
    """The snapshot after ``delta``; neither argument is changed.

    Raises:
        SequenceGapError: ``delta.seq`` is not ``snapshot.seq + 1``.
    """
    first = delta.seq
    if isinstance(delta, Fragment) and delta.first_seq is not None:
        first = delta.first_seq
    if first != snapshot.seq + 1 or first > delta.seq:
        raise SequenceGapError(
            f"delta {delta.seq} of run {snapshot.run_id!r} does not follow snapshot "
            f"{snapshot.seq}; take a fresh snapshot"
        )
    s = copied(snapshot, seq=delta.seq)
    match delta:
        case RunStatusChanged(status=status, text=text, error=error, cancelled_by=by):
            return copied(s, status=status, text=text, error=error, cancelled_by=by)
        case BlockAdded(block=block) | BlockUpdated(block=block):
            return copied(s, blocks=_put_block(s.blocks, block))
        case BlockRemoved(block_id=block_id):
            return copied(s, blocks=tuple(b for b in s.blocks if b.id != block_id))
        case (
            TextFragment(block_id=block_id, text=more)
            | ThinkingFragment(block_id=block_id, text=more)
            | ToolArgumentsFragment(block_id=block_id, text=more)
        ):
            grown = (copied(b, text=b.text + more) if b.id == block_id else b for b in s.blocks)
            return copied(s, blocks=tuple(grown))
        case CallStatusChanged(call=call):
            if any(c.id == call.id for c in s.calls):
                return copied(s, calls=tuple(call if c.id == call.id else c for c in s.calls))
            return copied(s, calls=(*s.calls, call))
        case CallRemoved(call_id=call_id):
            return copied(s, calls=tuple(c for c in s.calls if c.id != call_id))
        case PlanChanged(plan=plan):
            return copied(s, plan=plan)
        case UsageChanged(usage=usage):
            return copied(s, usage=usage)
        case PendingChanged(items=items):
            return copied(s, pending=tuple(items))
    raise TypeError(f"not a display delta: {delta!r}")  # pragma: no cover


def _put_block(blocks: tuple[DisplayBlock, ...], block: DisplayBlock) -> tuple[DisplayBlock, ...]:
    kept = [b for b in blocks if b.id != block.id]
    at = bisect.bisect_left([b.order for b in kept], block.order)
    kept.insert(at, block)
    return tuple(kept)


def coalesce(deltas: Sequence[Delta]) -> list[Delta]:
    """The same changes with each run of fragments of one block joined into one delta.

    A follower that fell behind gets fewer, longer fragments: applying the result in order
    gives what applying ``deltas`` gives (a joined fragment covers ``first_seq`` to ``seq``).
    """
    out: list[Delta] = []
    for delta in deltas:
        last = out[-1] if out else None
        if (
            isinstance(delta, Fragment)
            and isinstance(last, Fragment)
            and type(last) is type(delta)
            and last.block_id == delta.block_id
            and last.seq + 1 == (delta.first_seq if delta.first_seq is not None else delta.seq)
        ):
            first = last.first_seq if last.first_seq is not None else last.seq
            out[-1] = copied(delta, text=last.text + delta.text, first_seq=first)
        else:
            out.append(delta)
    return out
