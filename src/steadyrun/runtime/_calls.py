"""One tool call from its policy to its settlement: what the record becomes, and when.

``CallRunner.prepare`` decides before a call runs (unknown tool, invalid arguments, the tool's
policy: submit or confirm); ``CallRunner.execute`` runs the body and turns what it returned or
raised into the record's next state. Every change is saved before anything depends on it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from steadyrun._codec import encode, to_plain
from steadyrun._errors import StoreError, UsageError
from steadyrun._texts import Texts
from steadyrun.control import (
    AwaitExternal,
    CallRejected,
    CallView,
    Complete,
    Confirm,
    ControlSignal,
    Detach,
    HostFailure,
    InputRequired,
    Submit,
)
from steadyrun.records import CallCompletion, CallRecord, InputRequest
from steadyrun.records._copy import copied
from steadyrun.runtime._extension import ToolCall
from steadyrun.runtime._extset import EXT_STATE, ExtensionSet
from steadyrun.runtime._observers import ObserverSet
from steadyrun.runtime._recovery import (
    ORIGINAL_ARGUMENTS,
    apply_answers,
    blocks_run,
    interrupted_outcome,
    needs_recovery,
    settle_interrupted,
)
from steadyrun.runtime._scrub import scrub_record
from steadyrun.runtime._state import RunState
from steadyrun.runtime._versions import TOOL_VERSION, tool_version
from steadyrun.stores import Journal
from steadyrun.stores._leases import ensure_held
from steadyrun.tools import Tool, ToolArgumentsError, ToolContext, ToolSet, describe_issues

__all__ = ["CallRunner", "HandoverHook", "Runnable"]

HandoverHook = Callable[[str, CallRecord], Awaitable[None] | None]
"""Called with (run id, record) before a submission or a pending confirmation is saved; raise
``CallRejected`` to refuse it. A plain function or a coroutine function."""

CONFIRM_PROMPT = "steadyrun.confirm_prompt"
USAGE_NOTE = "steadyrun.usage"
"""Note key of the usage of model calls a tool made itself (JSON), counted when its batch closes."""


@dataclass(slots=True)
class Runnable:
    """A call cleared to run."""

    record: CallRecord
    tool: Tool
    args: dict[str, Any]
    key: str | None  # None: runs alone


@dataclass(kw_only=True, slots=True)
class CallRunner:
    """Prepares, executes and records the calls of a run."""

    state: RunState
    journal: Journal
    tools: ToolSet
    texts: Texts
    observers: ObserverSet
    clock: Callable[[], datetime]
    deps: Any = None
    can_suspend: bool = True
    on_handover: HandoverHook | None = None
    validate_completion: Callable[[Any], str | None] | None = None
    read_result: Callable[[str], str | None] | None = None
    extensions: ExtensionSet | None = None
    host_failure_details: bool = True
    owed_step: Callable[[], Awaitable[None]] | None = None
    """The step a batch opened with, while it is not saved: ``save`` leaves records to it."""
    unannounced: list[CallRecord] = field(default_factory=list)
    """Settled calls written with the next step: observers hear of them after it (``announce``)."""

    # -- before the body -------------------------------------------------------------------

    async def prepare(self, record: CallRecord) -> Runnable | None:
        """Check a queued call and apply its tool's policy; ``None`` when it will not run now."""
        tool = self.tools.get(record.name)
        if tool is None:
            available = ", ".join(self.tools.names) or self.texts.no_tools
            await self._fail(
                record, self.texts.unknown_tool.format(name=record.name, available=available)
            )
            return None
        try:
            args = tool.validate(record.arguments)
            key = tool.schedule(args)
        except ToolArgumentsError as exc:
            await self._fail(
                # The problems in the run's language, under one prefix (the exception's own
                # message is an English heading and list).
                record,
                self.texts.invalid_arguments.format(
                    name=record.name, error=describe_issues(exc, self.texts)
                ),
            )
            return None
        except Exception as exc:  # a concurrency_key function that raised
            await self._fail(
                record, self.texts.tool_error.format(name=record.name, error=_describe(exc))
            )
            return None
        if tool.policy is not None and record.decision is None:
            view = CallView(
                run_id=self.state.run_id, call_id=record.id, name=record.name, arguments=args
            )
            try:
                outcome = tool.policy(view)
            except Exception as exc:
                await self._fail(
                    record, self.texts.tool_error.format(name=record.name, error=_describe(exc))
                )
                return None
            if isinstance(outcome, Submit | Confirm) and not self.can_suspend:
                text = self.texts.cannot_suspend.format(name=record.name)
                await self._fail(record, text)
                return None
            if isinstance(outcome, Submit):
                await self._hand_over(
                    record,
                    status="awaiting_decision",
                    handover="submitted",
                    result=outcome.receipt,
                    payload=outcome.payload,
                )
                return None
            if isinstance(outcome, Confirm):
                # The tool's version: a decision approves the call as its tool is now.
                version = tool_version(tool)
                notes = {**record.notes, CONFIRM_PROMPT: outcome.prompt, TOOL_VERSION: version}
                await self._hand_over(
                    record, status="awaiting_decision", payload=outcome.payload, notes=notes
                )
                return None
            if outcome is not None:
                await self._fail(
                    record,
                    self.texts.tool_error.format(
                        name=record.name,
                        error=self.texts.bad_policy_outcome.format(kind=type(outcome).__name__),
                    ),
                )
                return None
        return Runnable(record=record, tool=tool, args=args, key=key)

    async def _hand_over(self, record: CallRecord, **changes: Any) -> None:
        """Save a submission or a pending confirmation; the host may refuse it as it is made."""
        # On its own write, which the journal may refuse (``CallRejected``): after the step.
        await self.save_owed_step()
        held = replace(record, rev=record.rev + 1, **changes)
        try:
            if self.on_handover is not None:
                # Sync or async, as observers may be: only an awaitable is awaited.
                outcome = self.on_handover(self.state.run_id, replace(held))
                if inspect.isawaitable(outcome):
                    await outcome
            await self.save(held)
        except CallRejected as refusal:
            await self.save(
                replace(
                    record,
                    rev=record.rev + 2,
                    status="rejected",
                    handover="",
                    result=self.texts.refused.format(name=record.name, reason=refusal.reason),
                    completed_at=self.clock(),
                )
            )

    # -- the body --------------------------------------------------------------------------

    def begin(self, item: Runnable) -> CallRecord:
        """The record of a call starting now, kept for the next write (``save_starts``).

        The start is durable before the body runs: a crash from then on is recovered as
        interrupted or needs_review, never by running the body again. The write is fenced,
        so no body starts once the run's claim is lost.
        """
        ensure_held()
        started = copied(
            item.record, rev=item.record.rev + 1, status="running", started_at=self.clock()
        )
        started = scrub_record(started)
        self.state.put_call(started, saved=False)
        return started

    async def save_starts(self, records: list[CallRecord]) -> None:
        """Write the starts of calls that start together; concurrent writes commit together."""
        run_id = self.state.run_id
        await asyncio.gather(*(self.journal.save_call(run_id, r) for r in records))
        for record in records:
            self.state.put_call(record, saved=True)

    async def execute(
        self,
        item: Runnable,
        started: CallRecord | None = None,
        settle_later: Callable[[], bool] | None = None,
    ) -> None:
        """Run the body of a cleared call and record how it ended.

        Args:
            item: The call.
            started: Its start (``begin``), already durable; ``None``: written here first.
            settle_later: Asked once the call settled: ``True`` leaves the settled record
                to the step that closes the batch (nothing else of the batch is left to
                run, so that step comes next), instead of a write of its own.
        """
        if started is None:
            started = self.begin(item)
            await self.save_starts([started])
        # Records are never changed in place, and each observer gets a copy of its own.
        await self.observers.emit("on_tool_start", self.state.run_id, started)
        request = started.input_request
        answered = request is not None and request.response is not None
        ctx = ToolContext(
            run_id=self.state.run_id,
            call_id=started.id,
            tool_name=started.name,
            provider_call_id=started.provider_call_id,
            deps=self.deps,
            can_suspend=self.can_suspend,
            input_state=request.state if answered and request else None,
            input_response=request.response if answered and request else None,
            edited_arguments=ORIGINAL_ARGUMENTS in started.notes,
            read_result=self.read_result,
            extensions=self.extensions.by_name if self.extensions is not None else {},
            texts=self.texts,
        )
        try:
            body = self._body(
                ToolCall(record=copied(started), tool=item.tool, args=item.args, context=ctx)
            )
            if item.tool.timeout is not None:
                value = await asyncio.wait_for(body, item.tool.timeout)
            else:
                value = await body
        except ControlSignal as signal:
            settled = self._signalled(started, item.tool, signal)
        except HostFailure as exc:
            settled = self._host_failed(started, exc)
        except TimeoutError:
            why = self.texts.tool_timed_out.format(
                name=item.tool.name, timeout=str(item.tool.timeout)
            )
            settled = self._unknown(started, why)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the run itself is being dropped: record nothing, like a crash
            settled = self._unknown(started, self.texts.tool_cancelled.format(name=item.tool.name))
        except Exception as exc:
            settled = self._failed(started, _describe(exc))
        else:
            settled = self._returned(started, item.tool, value)
        settled = scrub_record(self._annotated(settled, ctx))
        if settle_later is not None and settle_later():
            await self.save(settled, defer=True)
            self.unannounced.append(settled)  # observers hear of it (a copy) once it is saved
        else:
            await self.save(settled)
            await self.observers.emit("on_tool_settle", self.state.run_id, settled)
        if self.extensions is not None:
            await self.extensions.notify("on_tool_outcome", self.state.run_id, replace(settled))

    async def _body(self, call: ToolCall) -> Any:
        """The tool's body, inside the extensions' tool middleware."""
        if self.extensions is None:
            return await call.tool.invoke(call.args, call.context)

        async def invoke(c: ToolCall) -> Any:
            return await c.tool.invoke(c.args, c.context)

        return await self.extensions.run_tool(call, invoke)

    def _annotated(self, record: CallRecord, ctx: ToolContext) -> CallRecord:
        """Notes saved with the settled record: the tool's own usage, extension states it changed.

        Kept on the record, which is written before anything depends on it, so a crash before
        the next checkpoint loses neither.
        """
        if ctx.media and record.status == "succeeded":
            record = replace(record, media=[*record.media, *ctx.media])
        notes = {}
        if ctx.usage is not None:
            notes[USAGE_NOTE] = json.dumps(to_plain(ctx.usage, Any))
        if self.extensions is not None:
            changed = self.extensions.changed_states()
            if changed:
                notes[EXT_STATE] = json.dumps(changed)
        if not notes:
            return record
        return replace(record, notes={**record.notes, **notes})

    def _returned(self, record: CallRecord, tool: Tool, value: Any) -> CallRecord:
        try:
            text = tool.render(value)
            completion = None
            if tool.completion:
                _check_storable(value)
                completion = CallCompletion(value=value, fixed=False)
        except UsageError:
            # No JSON form: the body ran, so say that, and what it returned.
            kind = type(value).__name__
            error = self.texts.result_not_json.format(name=record.name, kind=kind)
            return self._failed(record, error, prefixed=False)
        except Exception as exc:
            return self._failed(record, self.texts.result_unstorable.format(error=_describe(exc)))
        if completion is not None:
            refused = self._refused_completion(record, value)
            if refused is not None:
                return refused
        original = record.notes.get(ORIGINAL_ARGUMENTS)
        if original is not None:
            text = self.texts.edited_arguments.format(arguments=str(record.arguments)) + text
        return copied(
            record,
            rev=record.rev + 1,
            status="succeeded",
            result=text,
            completion=completion,
            completed_at=self.clock(),
        )

    def _signalled(self, record: CallRecord, tool: Tool, signal: ControlSignal) -> CallRecord:
        name = record.name
        if isinstance(signal, Complete):
            if not tool.completion:
                return self._failed(record, self.texts.complete_outside_completion)
            try:
                _check_storable(signal.value)
                text = tool.render(signal.value)
            except Exception as exc:
                return self._failed(
                    record, self.texts.completion_unstorable.format(error=_describe(exc))
                )
            refused = self._refused_completion(record, signal.value)
            if refused is not None:
                return refused
            return replace(
                record,
                rev=record.rev + 1,
                status="succeeded",
                result=text,
                completion=CallCompletion(value=signal.value, fixed=signal.fixed),
                completed_at=self.clock(),
            )
        if not self.can_suspend and isinstance(signal, AwaitExternal | InputRequired):
            return self._failed(record, self.texts.cannot_suspend.format(name=name), prefixed=False)
        problem = _unstorable(
            getattr(signal, "payload", None),
            getattr(signal, "state", None),
            getattr(signal, "response_schema", None),
        )
        if problem:
            return self._failed(record, self.texts.handover_unstorable.format(error=problem))
        if isinstance(signal, AwaitExternal):
            return replace(
                record,
                rev=record.rev + 1,
                status="waiting",
                handover="await",
                payload=signal.payload,
            )
        if isinstance(signal, Detach):
            if not self.can_suspend:
                return self._failed(
                    record, self.texts.cannot_detach.format(name=name), prefixed=False
                )
            return replace(
                record,
                rev=record.rev + 1,
                status="waiting",
                handover="detached",
                result=signal.receipt,
                payload=signal.payload,
            )
        if isinstance(signal, InputRequired):
            wait = InputRequest(
                wait_id=f"{record.id}.w{record.rev + 1}",
                prompt=signal.prompt,
                response_schema=signal.response_schema,
                state=signal.state,
            )
            return replace(record, rev=record.rev + 1, status="awaiting_input", input_request=wait)
        kind = type(signal).__name__
        return self._failed(record, self.texts.unsupported_signal.format(kind=kind))

    def _refused_completion(self, record: CallRecord, value: Any) -> CallRecord | None:
        """The failed record when the agent's validator rejects a completion value."""
        if self.validate_completion is None:
            return None
        feedback = self.validate_completion(value)
        if feedback is None:
            return None
        error = self.texts.completion_rejected.format(feedback=feedback)
        return self._failed(record, error, prefixed=False)

    def _host_failed(self, record: CallRecord, exc: HostFailure) -> CallRecord:
        """A call whose host failed: its outcome is unknown; the record keeps the message.

        The model is told the message too, unless the host keeps it to itself
        (``Runtime(host_failure_details=False)``): it may name internal systems.
        """
        message = str(exc) or type(exc).__name__
        name = record.name
        if self.host_failure_details:
            why = self.texts.tool_host_failure.format(name=name, error=message)
        else:
            why = self.texts.tool_host_failure_hidden.format(name=name)
        return replace(self._unknown(record, why), error=message)

    def _unknown(self, record: CallRecord, why: str) -> CallRecord:
        """A call whose outcome is unknown: settled by its traits, as after a crash."""
        status, text = interrupted_outcome(record, self.texts)
        return replace(
            record,
            rev=record.rev + 1,
            status=status,
            result=self.texts.interrupted_detail.format(outcome=text, why=why),
            completed_at=self.clock(),
        )

    def _failed(self, record: CallRecord, error: str, *, prefixed: bool = True) -> CallRecord:
        text = self.texts.tool_error.format(name=record.name, error=error) if prefixed else error
        return replace(
            record, rev=record.rev + 1, status="failed", error=text, completed_at=self.clock()
        )

    async def _fail(self, record: CallRecord, error: str) -> None:
        await self.save(
            replace(
                record, rev=record.rev + 1, status="failed", error=error, completed_at=self.clock()
            )
        )

    async def cancel(self, record: CallRecord) -> None:
        """Record a call whose body never ran because new input arrived.

        Its start may be written already (``begin``, with the step that found the input): the
        body did not start, so neither does the record (no ``started_at``: budgets count
        started calls).
        """
        result = self.texts.cancelled.format(
            name=record.name, call_id=record.provider_call_id or record.id
        )
        await self.save(
            replace(
                record,
                rev=record.rev + 1,
                status="cancelled",
                result=result,
                started_at=None,
                completed_at=self.clock(),
            )
        )

    async def recover_batch(self, now: datetime, *, strict_settlement: bool) -> None:
        """On resume: settle what a crash left open, and carry out what people decided meanwhile.

        A call that started and never settled gets the extensions' recovery or the recovery
        rule (``settle_interrupted``). Decisions and answers apply only once every call that
        blocks the run has one: until then the batch stays as it is.
        """
        run_id = self.state.run_id
        for record in self.state.batch_calls():
            if needs_recovery(record):
                ext = self.extensions
                recovered = await ext.recover(record) if ext is not None else None
                settled = recovered or settle_interrupted(record, now, self.texts)
                await self.save(settled)
                if settled.settled:
                    await self.observers.emit("on_tool_settle", run_id, settled)
        answers = [(r, apply_answers(r, now, self.texts)) for r in self.state.batch_calls()]
        if any(
            blocks_run(r, strict_settlement=strict_settlement) and a is None for r, a in answers
        ):
            return  # the batch goes on only when every decision and answer is in
        for _, answered in answers:
            if answered is None:
                continue
            if not answered.settled:
                # Queued to run: the stored decision or answer already says so (a resume after
                # a crash queues it again), and its start is written before its body runs. A
                # commit of its own here was one more fsync before the first model call.
                self.state.put_call(scrub_record(answered), saved=False)
                continue
            await self.save(answered)
            await self.observers.emit("on_tool_settle", run_id, answered)

    async def save_owed_step(self) -> None:
        """Save the step the batch opened with, if it is still owed."""
        owed, self.owed_step = self.owed_step, None
        if owed is not None:
            await owed()

    async def announce(self) -> None:
        """Tell the observers of the settled calls the last step wrote (after it is durable)."""
        records, self.unannounced = self.unannounced, []
        for record in records:
            await self.observers.emit("on_tool_settle", self.state.run_id, record)

    async def save(self, record: CallRecord, *, defer: bool = False) -> None:
        """Write a record snapshot and keep it as the run's current one.

        Text a tool handed back that no store can encode is scrubbed first, as model output
        is: a tool's odd bytes must not fail the run's save (and every resume's after it).
        With ``defer`` (or while ``deferring``) the record is written with the next step.
        """
        record = scrub_record(record)
        if defer or self.owed_step is not None:
            self.state.put_call(record, saved=False)
            return
        await self.journal.save_call(self.state.run_id, record)
        self.state.put_call(record, saved=True)


def _check_storable(value: Any) -> None:
    """Raise ``StoreError`` when ``value`` has no stored form (a lone surrogate included).

    Encoded, not only converted: the conversion lets lone surrogates through, the store would
    not.
    """
    encode(value, Any)


def _unstorable(*values: Any) -> str | None:
    for value in values:
        try:
            _check_storable(value)
        except StoreError as exc:
            return str(exc)
    return None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
