"""A run's history (its steps, with what each added) and forks: new runs made from a step.

A fork at step ``k`` is a new run whose context is the original's after step ``k`` (read from
the store's step history, also where the context was rewritten later), with the checkpoint
and usage the original saved at ``k``. What happened after ``k`` is not carried: calls the
model asked for later are left out, and the calls of a batch still open at ``k`` are recorded
``cancelled`` in the fork (``Texts.not_carried``) unless step ``k`` itself settled them, so
nothing the original did or still does runs again in the fork unless the fork's model asks
for it again. The original is only read. An edit replaces the last message of the fork's
context: the input (a user message) or the model's response (an assistant message, whose tool
calls then become the fork's open batch, or whose text ends the fork's turn).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from steadyrun._codec import to_plain
from steadyrun._errors import ConflictError, RunNotFoundError, StepNotFoundError, UsageError
from steadyrun._texts import Texts
from steadyrun.chat import Message, TextPart, ToolCallPart, Usage
from steadyrun.records import (
    SETTLED_STATUSES,
    Block,
    CallRecord,
    Checkpoint,
    ContextChange,
    RunSnapshot,
    RunStatus,
    Step,
)
from steadyrun.records._history import StepEntry
from steadyrun.runtime._admission import open_batch, record_message
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._batch_results import call_id
from steadyrun.runtime._claims import Claims
from steadyrun.runtime._lengthcut import FINISH_REASON
from steadyrun.runtime._state import RunState
from steadyrun.stores import Store
from steadyrun.stores._history import StepHistory

__all__ = ["FORK_ORIGIN", "ForkOperations", "ForkedRun", "HistoryCall", "HistoryStep"]

FORK_ORIGIN = "steadyrun.fork"
"""Checkpoint ``extra`` key of a fork: ``{"run", "step", "edit"}`` (the edit's hash or null)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ForkedRun:
    """What ``Runtime.fork`` made (or found made by the same request before).

    Attributes:
        run_id: The new run.
        forked_from: The run it was forked from.
        step: The step of that run it starts from (its own first step has this number).
        created: ``False`` when the same fork existed already (a retry).
        status: The new run's status: ``suspended`` until it is resumed, or ``completed`` /
            ``failed`` when forked from a step that ended the run (or an edit's text answer).
    """

    run_id: str
    forked_from: str
    step: int
    created: bool
    status: RunStatus


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryCall:
    """A call snapshot a step saved.

    Attributes:
        id: The record id.
        name: The tool.
        status: Its status in that step.
    """

    id: str
    name: str
    status: str


@dataclass(kw_only=True, slots=True)
class HistoryStep:
    """One step (safe point) of a run, with what it added.

    Attributes:
        step: Its number; fork from it with ``Runtime.fork(run_id, at=step, ...)``.
        at: When it was saved.
        status: The run's status after it.
        phase: What came next: ``model`` (a model call), ``batch`` (the open batch's
            calls), ``done`` (the turn had ended).
        turn: The turn it belongs to.
        model_calls: Model calls made up to it.
        rewrote: Whether it rewrote the context (``messages`` is then the whole new context).
        messages: The messages it added to the context.
        context_length: Messages in the context after it.
        calls: The call snapshots it saved (calls settled between steps are written on their
            own and show in a later step's tool message).
        usage: The run's usage after it.
        text: The run's final text, when the step completed it.
        error: The failure's message, when the step failed the run.
        forked_from: ``(run id, step)`` on the first step of a fork.
    """

    step: int
    at: datetime | None
    status: RunStatus
    phase: Literal["model", "batch", "done"]
    turn: int
    model_calls: int
    rewrote: bool
    messages: list[Message]
    context_length: int
    calls: list[HistoryCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    text: str | None = None
    error: str | None = None
    forked_from: tuple[str, int] | None = None


class ForkOperations:
    """``history`` and ``fork``; mixed into ``Runtime``."""

    store: Store
    claims: Claims
    texts: Texts
    _agents: dict[str, Agent]
    _clock: Callable[[], datetime]

    async def history(self, run_id: str) -> list[HistoryStep]:
        """The run's steps, oldest first, each with the messages and calls it added.

        A fork lists its steps from the fork point on (``forked_from`` says where it came
        from); steps saved before the store kept a history are not listed.

        Raises:
            RunNotFoundError: No such run.
            UsageError: The store keeps no step history (a store of your own without
                ``StepHistory``).
        """
        store = _history_store(self.store)
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        entries = await store.history(run_id)
        logs = await _segment_logs(store, run_id, entries)
        names = {c.id: c.name for c in snap.calls}
        return [_step_view(e, logs[e.segment], names) for e in entries]

    async def fork(
        self,
        run_id: str,
        *,
        at: int,
        new_run_id: str,
        edit: Message | str | None = None,
        agent: Agent | None = None,
    ) -> ForkedRun:
        """Make a new run from step ``at`` of ``run_id``; the original is not changed.

        The new run's context is the original's after that step (``history`` lists them),
        optionally with its last message replaced by ``edit``; its checkpoint and usage are
        the original's at that step. Calls after the step are not carried, and calls of a
        batch open at the step are recorded ``cancelled`` (the model is told they did not
        run), so no side effect of the original runs again unless the new run's model asks
        for it. The new run waits (``suspended``) until it is resumed (``Runtime.resume``, or
        a worker after a wake-up). The same fork requested again returns the run made first.

        Args:
            run_id: The run to fork.
            at: The step to fork from.
            new_run_id: The new run's id.
            edit: Replaces the last message of the context at ``at``: a user message for the
                input, an assistant message for the model's response (its tool calls become
                the new run's open batch; without any, its text ends the turn). A text is a
                message of the role of the one it replaces.
            agent: The run's agent, when this runtime was not given it (an edit with tool
                calls needs its tools).

        Raises:
            RunNotFoundError: No run ``run_id``.
            StepNotFoundError: Its history has no step ``at``.
            ConflictError: ``new_run_id`` is taken by another run (or has input).
            RunBusyError: Another executor holds ``new_run_id``'s claim.
            UsageError: The edit does not fit (another role than the message it replaces, a
                tool message), or the store keeps no step history.
        """
        store = _history_store(self.store)
        if not new_run_id or "/" in new_run_id:
            raise UsageError(f"a fork needs a run id without '/', not {new_run_id!r}")
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        entries = await store.history(run_id)
        entry = next((e for e in entries if e.step == at), None)
        if entry is None:
            raise StepNotFoundError(run_id, at, _missing(entries, at))
        context = await store.context_at(run_id, at)
        if context is None:  # pragma: no cover - the entry was just listed
            raise StepNotFoundError(run_id, at)
        origin = {"run": run_id, "step": at, "edit": _edit_key(edit)}
        build = _ForkBuild(
            snap=snap,
            entry=entry,
            context=context,
            new_run_id=new_run_id,
            origin=origin,
            texts=self.texts,
            now=self._clock(),
        )
        step = build.step(edit, agent or self._agents.get(snap.run.agent))
        async with self.claims.executing(new_run_id):
            existing = await self.store.load(new_run_id)
            if existing is not None:
                if existing.checkpoint.extra.get(FORK_ORIGIN) != origin:
                    raise ConflictError(
                        f"run {new_run_id!r} exists already and is not this fork of {run_id!r} "
                        f"at step {at}; choose another id"
                    )
                status = existing.run.status
                return ForkedRun(
                    run_id=new_run_id, forked_from=run_id, step=at, created=False, status=status
                )
            if await self.store.pending(new_run_id, 0):
                raise ConflictError(f"run {new_run_id!r} has input already; choose another id")
            await self.store.save_step(new_run_id, step)
        return ForkedRun(
            run_id=new_run_id, forked_from=run_id, step=at, created=True, status=step.run.status
        )


@dataclass(kw_only=True, slots=True)
class _ForkBuild:
    """The first step of a fork, built from the original's snapshot and its entry at ``k``."""

    snap: RunSnapshot
    entry: StepEntry
    context: list[Message]
    new_run_id: str
    origin: dict[str, Any]
    texts: Texts
    now: datetime

    def step(self, edit: Message | str | None, agent: Agent | None) -> Step:
        entry = self.entry
        cp = copy.deepcopy(entry.checkpoint)
        # The fork's feed is its own and starts empty: input it is sent is numbered from 1.
        cp.claimed_through = 0
        cp.extra[FORK_ORIGIN] = self.origin
        status: RunStatus = entry.status if entry.status in ("completed", "failed") else "suspended"
        # The original's row, for what the history does not keep per step (the agent, and
        # whatever else a run row says of the run as a whole); the rest is the step's.
        run = replace(
            self.snap.run,
            run_id=self.new_run_id,
            status=status,
            text=None,
            completion=None,
            completion_reason=None,
            error_kind=None,
            error=None,
            usage=entry.usage,
            plan=None,
            created_at=self.now,
            updated_at=self.now,
            steps=entry.step,
        )
        if entry.ending is not None and status != "suspended":
            ending = entry.ending
            run.text, run.completion = ending.text, ending.completion
            run.completion_reason = ending.completion_reason
            run.error_kind, run.error = ending.error_kind, ending.error
        state = RunState(run, cp, list(self.context), [], self._blocks(cp))
        for record in self._calls(cp):
            state.put_call(record, saved=False)
        if edit is not None:
            self._edit(state, edit, agent)
        return Step(
            run=replace(state.run),
            checkpoint=state.cp,
            context=ContextChange(base=list(state.context)),
            blocks=list(state.blocks),
            calls=list(state.calls.values()),
        )

    def _blocks(self, cp: Checkpoint) -> list[Block]:
        return [b for b in self.snap.blocks if b.position < cp.next_position]

    def _calls(self, cp: Checkpoint) -> list[CallRecord]:
        """The original's calls up to the step, in creation order; the open batch settled."""
        open_batch = set(cp.batch) if cp.phase == "batch" else set()
        settled_then = {c.id for c in self.entry.calls if c.status in SETTLED_STATUSES}
        carried: set[str] = set()
        out: list[CallRecord] = []
        for record in self.snap.calls:
            if record.parent_id is not None:
                if record.parent_id in carried and record.parent_id not in open_batch:
                    out.append(record)  # a sub-agent's call under a delegation carried whole
                continue
            number = _model_call_number(record.model_call_id)
            if number is None or number > cp.model_calls:
                continue  # asked for after the step
            carried.add(record.id)
            if record.id in open_batch and record.id not in settled_then:
                record = self._not_carried(record)
            out.append(record)
        return out

    def _not_carried(self, record: CallRecord) -> CallRecord:
        result = self.texts.not_carried.format(
            name=record.name, call_id=record.provider_call_id or record.id
        )
        return CallRecord(
            id=record.id,
            model_call_id=record.model_call_id,
            provider_call_id=record.provider_call_id,
            name=record.name,
            arguments=record.arguments,
            rev=1,
            status="cancelled",
            result=result,
            completed_at=self.now,
            replayable=record.replayable,
            side_effects=record.side_effects,
        )

    def _edit(self, state: RunState, edit: Message | str, agent: Agent | None) -> None:
        """Replace the context's last message with ``edit``."""
        k = self.entry.step
        if not state.context:
            raise UsageError(f"step {k} has no message to replace")
        last = state.context[-1]
        kinds = {"user": "input (a user message)", "system": "input (a system message)"}
        kinds["assistant"] = "the model's response (an assistant message)"
        if last.role not in kinds:
            raise UsageError(
                f"an edit replaces the last message of step {k}, here a {last.role} message, "
                "which cannot be edited: fork from the step of the model's response instead"
            )
        if isinstance(edit, str):
            edit = Message(role=last.role, parts=[TextPart(text=edit)])
        if edit.role != last.role:
            raise UsageError(
                f"an edit replaces the last message of step {k}, which is {kinds[last.role]}: "
                f"give a {last.role} message, not a {edit.role} one"
            )
        cp = state.cp
        if last.role != "assistant":
            state.context[-1] = replace(
                edit, id=edit.id or last.id, revision=edit.revision or last.revision
            )
            cp.phase, cp.batch = "model", []
            _reopen(state)
            return
        model_call_id = f"m{cp.model_calls}"
        dropped = [b for b in state.blocks if b.model_call_id == model_call_id]
        if dropped:
            cp.next_position = min(b.position for b in dropped)
        state.blocks = [b for b in state.blocks if b.model_call_id != model_call_id]
        for record in [c for c in state.calls.values() if c.model_call_id == model_call_id]:
            del state.calls[record.id]
        state.context.pop()
        parts = [
            replace(p, call_id=p.call_id or call_id(model_call_id, i))
            for i, p in enumerate(edit.tool_calls)
        ]
        message = _with_call_ids(edit, parts)
        record_message(state, model_call_id, message)
        if parts:
            if agent is None:
                raise UsageError(
                    f"an edit with tool calls needs the run's agent {self.snap.run.agent!r}: "
                    "pass agent=... or Runtime(store, agents=[...])"
                )
            open_batch(
                state,
                model_call_id,
                parts,
                tools=agent.toolset,
                texts=self.texts,
                now=self.now,
                denied={},
            )
            cp.extra[FINISH_REASON] = "tool_calls"
            _reopen(state)
            return
        cp.phase, cp.batch = "done", []
        cp.extra[FINISH_REASON] = "stop"
        run = state.run
        run.status, run.text, run.completion, run.completion_reason = (
            "completed",
            message.text,
            None,
            None,
        )
        run.error_kind = run.error = None


def _reopen(state: RunState) -> None:
    """The fork's turn is not over: it waits to be resumed."""
    run = state.run
    run.status = "suspended"
    run.text = run.completion = run.completion_reason = run.error_kind = run.error = None


def _with_call_ids(message: Message, parts: list[ToolCallPart]) -> Message:
    calls = iter(parts)
    return replace(
        message,
        parts=[next(calls) if isinstance(p, ToolCallPart) else p for p in message.parts],
    )


def _model_call_number(model_call_id: str) -> int | None:
    if model_call_id.startswith("m") and model_call_id[1:].isdigit():
        return int(model_call_id[1:])
    return None


def _edit_key(edit: Message | str | None) -> str | None:
    """A hash of the edit, so the same fork requested again is recognised."""
    if edit is None:
        return None
    if isinstance(edit, str):
        return hashlib.sha256(b"text:" + edit.encode(errors="surrogatepass")).hexdigest()
    canonical = json.dumps(to_plain(edit, Message), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode(errors="surrogatepass")).hexdigest()


def _missing(entries: list[StepEntry], at: int) -> str:
    if not entries:
        return (
            "it lists no steps (they were saved before the store kept a history, or before "
            "the run was imported into this store)"
        )
    first, last = entries[0].step, entries[-1].step
    origin = entries[0].checkpoint.extra.get(FORK_ORIGIN)
    if at < first and isinstance(origin, dict):
        return (
            f"it is a fork of {origin.get('run')} at {origin.get('step')} and lists steps "
            f"{first} to {last}: fork {origin.get('run')} for an earlier step"
        )
    return f"it lists steps {first} to {last}"


def _history_store(store: Store) -> StepHistory:
    if not isinstance(store, StepHistory):
        raise UsageError(
            f"{type(store).__name__} keeps no step history (StepHistory: history, context_at); "
            "every steadyrun store does"
        )
    return store


async def _segment_logs(
    store: StepHistory, run_id: str, entries: Iterable[StepEntry]
) -> dict[int, list[Message]]:
    """Each segment's log, read once: the context after its longest step."""
    longest: dict[int, StepEntry] = {}
    for entry in entries:
        known = longest.get(entry.segment)
        if known is None or entry.checkpoint.context_length >= known.checkpoint.context_length:
            longest[entry.segment] = entry
    logs = {}
    for segment, entry in longest.items():
        logs[segment] = await store.context_at(run_id, entry.step) or []
    return logs


def _step_view(entry: StepEntry, log: list[Message], names: dict[str, str]) -> HistoryStep:
    cp = entry.checkpoint
    origin = cp.extra.get(FORK_ORIGIN)
    forked_from = None
    if isinstance(origin, dict) and origin.get("step") == entry.step and entry.rewrote:
        forked_from = (str(origin.get("run")), entry.step)
    ending = entry.ending
    return HistoryStep(
        step=entry.step,
        at=entry.at,
        status=entry.status,
        phase=cp.phase,
        turn=cp.turn,
        model_calls=cp.model_calls,
        rewrote=entry.rewrote,
        messages=log[entry.start : cp.context_length],
        context_length=cp.context_length,
        calls=[
            HistoryCall(id=c.id, name=names.get(c.id, ""), status=c.status) for c in entry.calls
        ],
        usage=entry.usage,
        text=ending.text if ending is not None else None,
        error=ending.error if ending is not None else None,
        forked_from=forked_from,
    )
