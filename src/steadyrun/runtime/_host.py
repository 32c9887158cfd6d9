"""What the host (a person's UI, another system) writes to runs that wait for it.

Host writes are final and decided in the store: whether a call waits for this kind of answer,
and whether an answer was recorded first, is settled inside the store's write transaction
(``overlay_external``), so of two hosts answering at once exactly one wins and the other gets
``ConflictError``; the same answer again is accepted and changes nothing. An unknown id or an
answer that fails its schema raises a typed ``UsageError`` before anything is written. Writes
are keyed by call id or wait id, never by position, and are carried out by the next ``resume``
(even when no process ran meanwhile).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

import jsonschema

from steadyrun._errors import (
    CallNotFoundError,
    InvalidResponseError,
    NotPendingError,
    RunNotFoundError,
    UnknownCallError,
    UsageError,
)
from steadyrun._texts import Texts
from steadyrun.records import CallDecision, CallRecord, CallUpdate, RunSnapshot
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._calls import CONFIRM_PROMPT
from steadyrun.runtime._claims import check_writable
from steadyrun.runtime._settlements import settlement_notice
from steadyrun.stores import Store
from steadyrun.tools import ToolArgumentsError, validate_strictly

__all__ = ["BY_META", "HostOperations", "PendingItem", "TaskQuestions", "pending_items"]

BY_META = "steadyrun.by"
"""Key, in the meta of an input message, of who sent it (``Runtime.send(by=...)``)."""

PendingKind = Literal[
    "result", "decision", "input", "review", "submission", "detached", "task_input"
]


@dataclass(kw_only=True, slots=True)
class PendingItem:
    """Something a run waits for, or that its host still owns, with what a UI needs.

    Attributes:
        kind: ``result`` (an awaited result: ``settle``), ``decision`` (a confirmation:
            ``decide``), ``input`` (an input request: ``answer``), ``review`` (a call needing
            review: ``settle``), ``submission`` (a submitted call: the host's own decision),
            ``detached`` (a call going on outside: ``settle`` when it ends), ``task_input``
            (a background task's question: ``answer``; the run does not wait for it).
        blocking: Whether the run waits for it (suspended until it is answered).
        call_id: The record id.
        name: The tool.
        arguments: The call's arguments (JSON text).
        payload: What the tool or policy handed over.
        prompt: What to ask the person (decisions and inputs).
        wait_id: The id to ``answer`` an input request with.
        response_schema: The JSON schema an input answer must satisfy.
    """

    kind: PendingKind
    blocking: bool
    call_id: str
    name: str
    arguments: str
    payload: Any = None
    prompt: str | None = None
    wait_id: str | None = None
    response_schema: dict[str, Any] | None = None


def pending_items(
    calls: Iterable[CallRecord], *, strict_settlement: bool = False
) -> list[PendingItem]:
    """What a run waits for, and the calls its host still owns, in call order (pure).

    The rule behind ``Runtime.pending``, for callers that hold the records already (the
    display stream).
    """
    items: list[PendingItem] = []
    for c in calls:
        base = {"call_id": c.id, "name": c.name, "arguments": c.arguments, "payload": c.payload}
        if c.status == "waiting" and c.handover == "await":
            items.append(PendingItem(kind="result", blocking=True, **base))
        elif c.status == "waiting" and c.handover == "detached":
            items.append(PendingItem(kind="detached", blocking=False, **base))
        elif c.status == "awaiting_decision" and c.handover == "submitted":
            items.append(PendingItem(kind="submission", blocking=False, **base))
        elif c.status == "awaiting_decision" and c.decision is None:
            prompt = c.notes.get(CONFIRM_PROMPT) or None
            items.append(PendingItem(kind="decision", blocking=True, prompt=prompt, **base))
        elif c.status == "awaiting_input" and c.input_request is not None:
            if c.input_request.response is None:
                items.append(
                    PendingItem(
                        kind="input",
                        blocking=True,
                        prompt=c.input_request.prompt,
                        wait_id=c.input_request.wait_id,
                        response_schema=c.input_request.response_schema,
                        **base,
                    )
                )
        elif c.status == "needs_review":
            items.append(PendingItem(kind="review", blocking=strict_settlement, **base))
    return items


class TaskQuestions(Protocol):
    """What ``pending`` and ``answer`` ask of background tasks (a ``TaskManager`` is one).

    The runtime names the port; the background layer, below it, implements it.
    """

    async def pending_questions(self, run_id: str) -> list[PendingItem]:
        """The questions the run's tasks wait on (kind ``task_input``; the run does not wait)."""
        ...

    async def answer_question(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> str | None:
        """Answer the question of the run's task on ``wait_id`` (once; a repeat changes nothing).

        ``by`` names who answered (kept with the question).

        Returns:
            The task's call id, or ``None`` when no task of the run asked on ``wait_id``.
        """
        ...


class HostOperations:
    """The host's writes; mixed into ``Runtime``."""

    store: Store
    _agents: dict[str, Agent]
    _clock: Callable[[], datetime]
    texts: Texts
    post_settlements: bool = False
    tasks: TaskQuestions | None = None

    def use_tasks(self, manager: TaskQuestions) -> None:
        """Route background tasks' questions through ``pending`` and ``answer``.

        ``pending`` then lists the questions of a run's tasks (kind ``task_input``), and
        ``answer`` hands answers to their wait ids to ``manager``.
        """
        self.tasks = manager

    async def pending(self, run_id: str) -> list[PendingItem]:
        """Everything the run waits for, and calls its host still owns, in call order."""
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        items = pending_items(snap.calls, strict_settlement=self._strict(snap.run.agent))
        if self.tasks is not None:
            items.extend(await self.tasks.pending_questions(run_id))
        return items

    async def settle(
        self,
        run_id: str,
        call_id: str,
        *,
        result: str | None = None,
        error: str | None = None,
        by: str | None = None,
    ) -> CallRecord:
        """Record the outcome of a call the host owns; then ``resume`` if the run waits.

        Works for awaited results (``await_external``), detached calls, submissions, calls
        needing review (the host checked what happened), and calls still running whose
        outside system answered before the runtime recorded the handover (the host's write
        wins). Give exactly one of ``result`` (it succeeded) or ``error`` (it failed; the model
        sees the text). The first outcome recorded is final: the same one again is accepted
        and changes nothing, a different one raises ``ConflictError``; a call the host does
        not own raises ``NotPendingError``. ``by`` names who settled it (``settled_by``; a
        repeat keeps the first one's).

        The model already went on past a detached or submitted call (it has the receipt): it
        never hears of the outcome, unless the runtime posts it (``Runtime(post_settlements=
        True)``): then a ``system`` message in the run's feed tells it, at the run's next turn.
        """
        await check_writable(self.store.leases, run_id)
        if (result is None) == (error is None):
            raise UsageError("settle() takes exactly one of result=... or error=...")
        update = CallUpdate(
            status="succeeded" if error is None else "failed",
            result=result,
            error=error,
            completed_at=self._clock(),
            by=by,
        )
        # Whether the host may record it, and whether another outcome came first, is decided
        # inside the store's write (overlay_external): a check here would race.
        settled = await self._update(run_id, call_id, update)
        notice = settlement_notice(settled, self.texts) if self.post_settlements else None
        if notice is not None:
            await self.store.append(run_id, notice)  # the model learns it at the next turn
        return settled

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | str | None = None,
        decided_by: str | None = None,
        by: str | None = None,
    ) -> CallRecord:
        """Record a final decision on a call waiting for one; then ``resume``.

        An approved call runs on resume (with ``arguments`` instead of the model's, if given:
        they are validated strictly against the schema of the tool of the run's own agent now,
        the decision keeps the model's arguments beside them, and the model is told they were
        edited); a rejected one never runs and the model sees ``reason``. The first decision
        recorded is final: the same one again is accepted (idempotent), a different one raises
        ``ConflictError``, also when two hosts decide at once. ``by`` (or its older name
        ``decided_by``) names who decided.
        """
        if by is not None and decided_by is not None and by != decided_by:
            raise UsageError(f"decide() got by={by!r} and decided_by={decided_by!r}: give one")
        await check_writable(self.store.leases, run_id)
        if arguments is not None and not approve:
            raise UsageError("edited arguments come with an approval, not a rejection")
        args_text = original = None
        if arguments is not None:
            # Edited arguments are checked against the call's tool first: only then is the
            # call read before the write (a plain decision is one write transaction).
            call = await self._call(run_id, call_id)
            args_text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            args_text = await self._checked_arguments(run_id, call, args_text)
            # Only an awaiting call takes a decision, and its arguments are still the model's.
            original = call.arguments
        decision = CallDecision(
            approve=approve,
            reason=reason,
            arguments=args_text,
            original_arguments=original,
            decided_by=by if by is not None else decided_by,
            decided_at=self._clock(),
        )
        # Decided inside the store's write: a decision recorded first (by another host, even
        # one process away) wins, and this one raises ConflictError or, the same, changes nothing.
        return await self._update(run_id, call_id, CallUpdate(decision=decision))

    async def answer(
        self, run_id: str, wait_id: str, response: Any, *, by: str | None = None
    ) -> CallRecord:
        """Answer an input request by its wait id; then ``resume``.

        The answer is validated against the request's schema first (``InvalidResponseError``,
        nothing stored). An answer to a wait that is no longer current raises
        ``NotPendingError``; the same answer again is accepted, a different one raises
        ``ConflictError``. ``by`` names who answered (``InputRequest.answered_by``).
        """
        await check_writable(self.store.leases, run_id)
        if self.tasks is not None:
            # A background task's question: answered once (a repeat changes nothing).
            task_call = await self.tasks.answer_question(run_id, wait_id, response, by=by)
            if task_call is not None:
                return await self._call(run_id, task_call)
        call_id = wait_id.rpartition(".w")[0]
        if not call_id:
            raise UnknownCallError(f"{wait_id!r} is not a wait id of run {run_id!r}")
        try:
            call = await self._call(run_id, call_id)
        except UnknownCallError:
            raise UnknownCallError(f"run {run_id!r} has no wait {wait_id!r}") from None
        request = call.input_request
        if request is None or request.wait_id != wait_id:
            raise NotPendingError(
                f"wait {wait_id!r} of run {run_id!r} is not open (call {call.id!r} is "
                f"{call.status!r}); a late or duplicate answer changes nothing"
            )
        if request.response_schema is not None:
            try:
                jsonschema.validate(response, request.response_schema)
            except jsonschema.ValidationError as exc:
                where = "/".join(str(p) for p in exc.absolute_path) or "the answer"
                raise InvalidResponseError(
                    f"answer to {wait_id!r} does not fit its schema at {where}: {exc.message}"
                ) from None
            except jsonschema.SchemaError as exc:
                raise InvalidResponseError(
                    f"the schema of {wait_id!r} is not a valid JSON schema: {exc.message}"
                ) from None
        # Whether the wait is still open and unanswered is decided inside the store's write.
        update = CallUpdate(input_response=response, wait_id=wait_id, by=by, at=self._clock())
        return await self.store.update_call(run_id, call.id, update)

    async def _checked_arguments(self, run_id: str, call: CallRecord, arguments: str) -> str:
        # The tool of the run's own agent: another agent may have a tool of the same name.
        snap = await self.store.load(run_id)
        agent = self._agent_for(snap) if snap is not None else None
        tool = agent.toolset.get(call.name) if agent is not None else None
        if tool is None:
            raise UsageError(
                f"cannot check edited arguments of {call.name!r}: this runtime does not know "
                "the run's agent or its tool (pass Runtime(store, agents=[...]))"
            )
        try:
            validate_strictly(tool, arguments)
        except ToolArgumentsError as exc:
            raise InvalidResponseError(
                f"edited arguments of call {call.id!r} ({call.name}) are invalid: {exc}"
            ) from None
        return arguments

    def _agent_for(self, snap: RunSnapshot) -> Agent | None:
        # The version the run resumes under (Runtime picks among versions of a name).
        return self._agents.get(snap.run.agent)

    def _strict(self, agent_name: str) -> bool:
        agent = self._agents.get(agent_name)
        return agent.strict_settlement if agent else False

    async def _update(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        """``store.update_call``; an unknown run or call is the typed error ``_call`` raises.

        The write itself finds the call (no read before it): only when it finds none is the
        run looked up, to say which of the two is missing.
        """
        try:
            return await self.store.update_call(run_id, call_id, update)
        except CallNotFoundError:
            await self._call(run_id, call_id)  # raises RunNotFoundError or UnknownCallError
            raise  # the call appeared meanwhile: the store's word stands

    async def _call(self, run_id: str, call_id: str) -> CallRecord:
        # One row, not the whole run: host writes come often and runs grow long.
        call = await self.store.load_call(run_id, call_id)
        if call is not None:
            return call
        if await self.store.load(run_id) is None:  # only on this error path
            raise RunNotFoundError(run_id)
        raise UnknownCallError(f"run {run_id!r} has no call {call_id!r}")
