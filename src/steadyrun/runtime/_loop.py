"""The run state machine: turns, model calls, admission of responses, batches, safe points.

One ``Execution`` drives one run from its stored state until it completes, suspends or fails.
Every safe point saves a step; a crash anywhere resumes from the last one.

A run stands in a phase (``Checkpoint.phase``) with a status (``RunRecord.status``). ``_loop``
dispatches on the phase; each row's ways out are the transitions below, all saved.

========  ==========  =====================================  ==================================
phase     status      the run                                the executor
========  ==========  =====================================  ==================================
model     running     asks the model next                    ``_model_phase``: the limits, the
                                                             request, the response admitted
model     suspended   stopped by a used-up budget            resume: running, the same call
model     failed      a model call failed, a response was    resume: running, the same call
                      refused, a limit or correction ran
                      out
batch     running     has a batch of tool calls open         ``_batch_phase``: runs the calls,
                                                             then their results in
batch     suspended   a call waits for a decision, an        resume: recovers the batch, then
                      answer or a handed-over body           running
done      completed   answered the turn; waits for input     resume with input: a new turn
done      failed      more input would pass max_turns        resume with input: the same check
any       cancelled   cancelled by the host                  never resumed (``Runtime``
                                                             refuses)
========  ==========  =====================================  ==================================

Transitions (``admit_by_finish`` decides those out of ``model`` by the response):

- start, or ``done`` with new input -> ``model``/running (``_start``, ``_resume``);
  ``done``/failed instead when the input would pass ``Limits.max_turns``.
- ``model``/running -> ``batch``/running: tool calls asked for (``_open_batch``);
  -> ``model``/running: a correction (a guard's, a length cut's) or new input superseding the
  answer; -> ``done``/completed: the answer (``Endings.complete``, or a fallback completion);
  -> ``model``/failed: a limit, a refused response, a failed call (``Endings.fail``);
  -> ``model``/suspended: a used-up budget (``Endings.over_budget``; failed if it cannot wait).
- ``batch``/running -> ``batch``/suspended: a call blocks the run (``Endings.suspend``);
  -> ``model``/running: the results are in; -> ``done``/completed: a completion tool or a
  direct result; -> ``model``/failed: out of corrections.
- suspended or failed -> the same phase, running, on resume (``_resume``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime
from functools import partial

from steadyrun._codec import to_plain
from steadyrun._errors import (
    CorrectionsExhausted,
    IterationLimitExceeded,
    ModelCallFailed,
    StoreError,
)
from steadyrun._texts import Texts
from steadyrun.chat import (
    Message,
    ModelRequest,
    ModelResponse,
    ResponseDelta,
    TextPart,
    Usage,
)
from steadyrun.context import ContextEvent, verbatim_refs
from steadyrun.media import MediaOptions, MediaPreparer, MediaWatch, supplying
from steadyrun.media._supply import current_supply
from steadyrun.records import Block
from steadyrun.records._copy import copied
from steadyrun.runtime._admission import open_batch, record_message, scrub_response, tools_usage
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._batch import BatchRunner
from steadyrun.runtime._batch_results import (
    completion_of,
    direct_text,
    tool_message,
    uses_correction,
)
from steadyrun.runtime._budgets import check_budget
from steadyrun.runtime._calls import CallRunner, HandoverHook
from steadyrun.runtime._completion import Correct, Finish, GuardView
from steadyrun.runtime._deltas import DeltaSink, call_client
from steadyrun.runtime._endings import Endings
from steadyrun.runtime._extension import ModelCall, ToolBatch
from steadyrun.runtime._extset import ExtensionSet
from steadyrun.runtime._finish_rule import admit_by_finish, refusal
from steadyrun.runtime._fitting import context_manager, fit_context
from steadyrun.runtime._handle import ExecutionHandle
from steadyrun.runtime._input import (
    Fresh,
    TurnLimit,
    fresh_input,
    take_input,
    turn_limit_failure,
)
from steadyrun.runtime._lengthcut import FINISH_REASON, correct_length_cut
from steadyrun.runtime._observers import ObserverSet, observed
from steadyrun.runtime._recovery import blocks_run
from steadyrun.runtime._request import CORRECTION, request_builder
from steadyrun.runtime._result import RunResult
from steadyrun.runtime._state import RunState
from steadyrun.runtime._versions import agent_version, reconcile_batch
from steadyrun.stores import Claim, Store
from steadyrun.stores._leases import ensure_held

__all__ = ["Execution"]


class Execution:
    """Drives one run of one agent on one store."""

    def __init__(
        self,
        *,
        state: RunState,
        agent: Agent,
        store: Store,
        observers: ObserverSet,
        texts: Texts,
        clock: Callable[[], datetime],
        on_handover: HandoverHook | None = None,
        can_suspend: bool = True,
        extensions: ExtensionSet | None = None,
        subagent: bool = False,
        media: MediaOptions | None = None,
        media_preparer: MediaPreparer | None = None,
        host_failure_details: bool = True,
    ) -> None:
        self.state = state
        state.run.agent_version = agent_version(agent, state.run_id)  # saved next
        self.agent = agent
        self.store = store
        self.observers = observers
        self.texts = texts
        self.clock = clock
        self.limits = agent.limits
        self.subagent = subagent
        self._garbled: set[int] = set()
        # The usage of the response being admitted: shown on its first block.
        self._response_usage: Usage | None = None
        self._step_owed = False  # the step of a batch just opened, left to the batch to save
        # A run resumed in "model" has no commit of this process to say what its feed holds:
        # the step the last process saved may have seen input it died before taking.
        self._feed_unread = False
        self._media_watch = MediaWatch()
        self.media_options = media or MediaOptions()
        self.media = media_preparer or MediaPreparer(self.media_options, texts)
        self.ext = extensions
        if self.ext is None and agent.extensions:
            self.ext = ExtensionSet.restored(agent.extensions, state.cp, state.batch_calls())
        self.end = Endings(
            state=state,
            agent=agent,
            store=store,
            observers=observers,
            clock=clock,
            ext=self.ext,
            subagent=subagent,
        )
        reserved = self.ext.reserved_tokens if self.ext is not None else 0
        self.context = context_manager(agent, reserved, self._context_event, self.texts)
        self.calls = CallRunner(
            state=state,
            journal=store,
            tools=agent.toolset,
            texts=texts,
            observers=observers,
            clock=clock,
            deps=agent.deps,
            can_suspend=can_suspend and agent.can_suspend,
            on_handover=on_handover,
            validate_completion=agent.completion_validator,
            read_result=self.read_result,
            extensions=self.ext,
            host_failure_details=host_failure_details,
        )
        self.end.announce = self.calls.announce
        if self.ext is not None and not subagent:
            child = partial(  # a sub-agent's run shares the store, texts and extensions
                Execution,
                store=store,
                observers=observers,
                texts=texts,
                clock=clock,
                can_suspend=False,
                extensions=self.ext,
                subagent=True,
                media=self.media.options,
                media_preparer=self.media,
                host_failure_details=host_failure_details,  # the host's choice holds there too
            )
            handle = ExecutionHandle(
                run_id=state.run_id,
                agent=agent,
                subagent=subagent,
                store=store,
                texts=texts,
                clock=clock,
                save_call=self.calls.save,
                child=child,
            )
            for ext in self.ext.instances:
                ext.attach(handle)

    # -- entry points ----------------------------------------------------------------------

    async def start(self, first: Claim | None = None) -> RunResult:
        """Drive a new run: claim its first input (or take ``first``, claimed), then loop."""
        return await observed(
            self.observers, self.state.run_id, self.agent.name, self._start(first)
        )

    async def resume(self) -> RunResult:
        """Drive a stored run on from its last checkpoint."""
        return await observed(self.observers, self.state.run_id, self.agent.name, self._resume())

    async def _start(self, first: Claim | None) -> RunResult:
        try:
            claimed = await self._claim_input(new_turn=True, claim=first)
        except TurnLimit as exc:
            return await self.end.fail(turn_limit_failure(exc, self.limits.max_turns))
        if not claimed:
            raise StoreError(f"run {self.state.run_id!r}: the store's feed lost the run's input")
        await self.end.save()
        return await self._loop()

    async def _resume(self) -> RunResult:
        state = self.state
        cp = state.cp
        if self.ext is not None and not self.subagent:
            await self.ext.notify("on_restore", state.run_id)
        if len(state.context) != cp.context_length:
            raise StoreError(
                f"run {state.run_id!r}: context log has {len(state.context)} messages, "
                f"checkpoint expects {cp.context_length}; the store lost part of the log"
            )
        if cp.phase == "done":  # completed, or failed at max_turns: only new input goes on
            try:
                claimed = await self._claim_input(new_turn=True)
            except TurnLimit as exc:
                return await self.end.fail(turn_limit_failure(exc, self.limits.max_turns))
            if not claimed:
                await self.store.consume(state.run_id, cp.claimed_through)  # crash before it
                return self.end.result()  # nothing new: the run stays as it ended
            state.run.status = "running"
            await self.end.save()
            return await self._loop()
        # Suspended or failed in "model" or "batch": running again, in the same phase.
        if state.run.status == "failed" and state.run.error_kind == "IterationLimitExceeded":
            cp.iteration = 0  # the host asked for more: give the turn another full budget
        state.run.status = "running"
        if cp.phase == "batch":
            await self._recover_batch()
        else:
            self._feed_unread = True
        return await self._loop()

    # -- the loop (see the module's table) -------------------------------------------------

    async def _loop(self) -> RunResult:
        while True:
            if self.state.cp.phase == "batch":
                outcome = await self._batch_phase()
            else:  # "model": a run leaves "done" only by new input, in _resume
                outcome = await self._model_phase()
            if outcome is not None:
                return outcome

    async def _model_phase(self) -> RunResult | None:
        """``model``/running: the limits, then one model call and its response admitted."""
        unread, self._feed_unread = self._feed_unread, False
        if self.end.feed or unread:
            # The last step's commit saw input waiting (appended after the loop last looked),
            # or a resumed run does not know: it goes in before the model call, at this safe
            # point, as it would have at the end of the batch had it come a moment sooner.
            through = self.state.cp.claimed_through
            await self._claim_input(new_turn=False, committed=not unread)
            if self.state.cp.claimed_through != through:
                await self.end.save()
        cp = self.state.cp
        if cp.iteration >= self.limits.max_iterations:
            if self.agent.completion_fallback is not None:
                return await self.end.fallback("budget_exhausted")
            return await self.end.fail(
                IterationLimitExceeded(
                    f"the turn made {cp.iteration} model calls without finishing "
                    f"(Limits.max_iterations={self.limits.max_iterations}); raise the limit "
                    "or resume the run to give it another turn's worth"
                )
            )
        exceeded = check_budget(self.state, self.agent)
        if exceeded is not None:
            return await self.end.over_budget(exceeded)
        model_call_id = f"m{cp.model_calls + 1}"
        request = await self._request(model_call_id)
        ensure_held()  # an executor that lost its claim makes no model call
        try:
            response = await self._respond(model_call_id, request)
        except Exception as exc:
            return await self.end.fail(
                ModelCallFailed(
                    f"model call {model_call_id} failed: {type(exc).__name__}: {exc}; "
                    "resume the run to retry from its last checkpoint"
                )
            )
        return await self._admit(model_call_id, response)

    async def _request(self, model_call_id: str) -> ModelRequest:
        """The next model call's request, from a context fitted (and saved) for it."""
        state, cp = self.state, self.state.cp
        build = request_builder(self.agent, state, self.ext, subagent=self.subagent)
        # Fitting may save a rewritten context: the counters and a pending correction change
        # only after it, so a crash in between replays this model call as it was.
        if await fit_context(self.context, self.agent, state, self.observers, model_call_id, build):
            await self.end.save()  # the new base is durable before the model sees it
        cp.iteration += 1
        cp.model_calls += 1
        cp.extra.pop(CORRECTION, None)
        request = build(state.context)
        await self.observers.emit("on_model_request", state.run_id, model_call_id, request)
        return request

    async def _respond(self, model_call_id: str, request: ModelRequest) -> ModelResponse:
        """The model's response, with the media the request refers to supplied."""
        if not self._media_watch.needs(self.state.context, self.state.generation, request):
            if current_supply() is None:  # nothing to supply, nothing supplied around it
                return await self._call_model(model_call_id, request)
            supply = None
        else:
            request, supply = await self.media.prepare(request, self.agent.client)
        with supplying(supply):
            return await self._call_model(model_call_id, request)

    async def _admit(self, model_call_id: str, response: ModelResponse) -> RunResult | None:
        """Take a response into the run by its finish reason (``admit_by_finish``)."""
        state = self.state
        response, self._garbled = scrub_response(response)
        await self.observers.emit("on_model_response", state.run_id, model_call_id, response)
        if self.ext is not None:
            await self.ext.notify("on_model_output", state.run_id, model_call_id, response)
        # The runtime counts requests itself: a provider's usage may leave them out.
        self._response_usage = copied(response.usage, requests=1)
        state.run.usage = state.run.usage + self._response_usage
        state.cp.extra[FINISH_REASON] = response.finish_reason
        match admit_by_finish(response, correct_length_cut=self.agent.correct_length_cut):
            case "batch":
                await self._open_batch(model_call_id, response)
                # Saved by the batch with its first calls' starts: one commit, not two.
                self._step_owed = True
                return None
            case "length_cut":
                return await self._correct_length(model_call_id, response)
            case "calls_refused" | "content_filter" | "error" as refused:
                return await self.end.fail(refusal(refused, model_call_id, response))
            case "answer":
                return await self._answer(model_call_id, response.message)

    async def _answer(self, model_call_id: str, message: Message) -> RunResult | None:
        """A text answer: new input supersedes it (it stays in the history), else delivered."""
        fresh = await fresh_input(self.store, self.state)
        if not fresh:
            return await self._deliver(model_call_id, message)
        self._record_message(model_call_id, message)
        take_input(
            self.state, fresh, new_turn=False, max_turns=self.limits.max_turns, at=self.clock()
        )
        await self._claimed(fresh)
        await self.end.save()
        return None

    async def _call_model(self, model_call_id: str, request: ModelRequest) -> ModelResponse:
        """The model call, inside the extensions' model middleware."""
        client, sink = self.agent.client, self._delta_sink(model_call_id)
        if self.ext is None:
            return await call_client(client, request, sink)

        # The fragments come from the client inside the middleware: a middleware that answers
        # by itself streams nothing, one that calls again streams each attempt.
        async def respond(call: ModelCall) -> ModelResponse:
            return await call_client(client, call.request, sink)

        call = ModelCall(
            run_id=self.state.run_id,
            model_call_id=model_call_id,
            agent=self.agent.name,
            subagent=self.subagent,
            request=request,
        )
        return await self.ext.call_model(call, respond)

    def _delta_sink(self, model_call_id: str) -> DeltaSink | None:
        """Where the call's fragments go: the observers, when any listens."""
        run_id, emit = self.state.run_id, self.observers.emit
        if not self.observers.wants("on_model_delta", run_id):
            return None

        async def sink(delta: ResponseDelta) -> None:
            await emit("on_model_delta", run_id, model_call_id, delta)

        return sink

    async def _deliver(self, model_call_id: str, message: Message) -> RunResult | None:
        """Put the final text past the guard, then complete (or correct, or finish)."""
        guard = self.agent.guard
        text = message.text
        if guard is None:
            self._record_message(model_call_id, message)
            return await self.end.complete(text)
        cp = self.state.cp
        view = GuardView(
            run_id=self.state.run_id,
            text=text,
            messages=list(self.state.context),
            turn=cp.turn,
            corrections_left=max(0, self.limits.corrections - cp.corrections),
        )
        verdict = guard.review(view)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if isinstance(verdict, Correct):
            if cp.corrections >= self.limits.corrections:
                return await self.end.out_of_corrections("guard_rejected", "the guard rejected")
            cp.corrections += 1
            rejected = [message, Message(role="user", parts=[TextPart(text=verdict.prompt)])]
            cp.extra[CORRECTION] = to_plain(rejected, list[Message])
            await self.end.save()  # -> model/running: the next call sees the correction
            return None
        self._record_message(model_call_id, message)
        if isinstance(verdict, Finish):
            return await self.end.complete(text, completion=verdict.value)
        return await self.end.complete(text)

    async def _context_event(self, event: ContextEvent) -> None:
        await self.observers.emit("on_context", self.state.run_id, event)

    # -- model responses -------------------------------------------------------------------

    def _record_message(self, model_call_id: str, message: Message) -> list[Block]:
        return record_message(
            self.state, model_call_id, message, usage=self._response_usage, at=self.clock()
        )

    async def _open_batch(self, model_call_id: str, response: ModelResponse) -> None:
        """``model`` -> ``batch``: the response's calls queued, or refused at once."""
        parts = response.message.tool_calls
        denied: dict[int, str] = {}
        if self.ext is not None:
            review = ToolBatch(
                run_id=self.state.run_id, model_call_id=model_call_id, calls=tuple(parts)
            )
            denied = dict((await self.ext.review_batch(review)).denied)
        self._record_message(model_call_id, response.message)
        open_batch(
            self.state,
            model_call_id,
            parts,
            tools=self.agent.toolset,
            texts=self.texts,
            now=self.clock(),
            denied=denied,
            garbled=self._garbled,
        )

    async def _correct_length(
        self, model_call_id: str, response: ModelResponse
    ) -> RunResult | None:
        n = self.limits.corrections
        if correct_length_cut(self.state, model_call_id, response, corrections=n, texts=self.texts):
            await self.end.save()
            return None
        what = f"model call {model_call_id} was cut by the length limit"
        if not response.message.tool_calls:  # a cut answer: as a guard's rejection would be
            return await self.end.out_of_corrections("corrections_exhausted", what)
        return await self.end.fail(
            CorrectionsExhausted(
                f"{what} inside tool calls and the run has used its {n} correction(s); raise "
                "ModelSettings.max_tokens or Limits.corrections"
            )
        )

    # -- batches ---------------------------------------------------------------------------

    async def _recover_batch(self) -> None:
        """On resume in ``batch``: the agent's changes first, then crashes and decisions."""
        now = self.clock()
        if reconcile_batch(self.state, self.agent, self.texts, now):
            await self.end.save()  # replaced and settled calls with the batch, in one step
        await self.calls.recover_batch(now, strict_settlement=self.agent.strict_settlement)

    async def _batch_phase(self) -> RunResult | None:
        """``batch``/running: run the queued calls, then take their results in (or suspend)."""
        state = self.state
        owed, self._step_owed = self._step_owed, False
        # The batch's first check of the feed takes what the last step's commit said (before
        # the model call); input appended since is seen by the commit that starts the calls
        # (``input_seen``: they are cancelled before any body runs) or by the commit after
        # them (taken before the next model call).
        committed = [self.end.feed]

        async def input_pending() -> bool:
            waiting, committed[0] = committed[0], None
            if waiting is None:  # later rounds, or a store that does not say: read the feed
                return await self._input_pending()
            return bool(waiting)

        runner = BatchRunner(
            calls=self.calls,
            input_pending=input_pending,
            max_concurrent=self.limits.max_concurrent_tool_calls,
            save_step=self.end.save if owed else None,
            input_seen=lambda: bool(self.end.feed),
        )
        await runner.run()
        records = state.batch_calls()
        strict = self.agent.strict_settlement
        if any(blocks_run(r, strict_settlement=strict) for r in records):
            return await self.end.suspend()  # -> batch/suspended
        # -> model/running with the results in, unless a completion or direct result ends it
        state.append(tool_message(records, self.agent.toolset, self.agent.context, self.texts))
        state.run.usage = state.run.usage + tools_usage(records)
        state.cp.phase = "model"
        state.cp.batch = []
        completion = completion_of(records)
        if completion is not None:
            value, fixed = completion
            if fixed or not await self._claim_input(new_turn=False):
                text = next(r.result for r in records if r.completion is not None)
                return await self.end.complete(text or "", completion=value)
            await self.end.save()  # new input supersedes the completion: answer it
            return None
        if uses_correction(records, self.agent.toolset):
            if state.cp.corrections >= self.limits.corrections:
                return await self.end.out_of_corrections(
                    "corrections_exhausted", "a completion was not accepted"
                )
            state.cp.corrections += 1
        direct = direct_text(records, self.agent.toolset)
        if direct is not None:
            return await self.end.complete(direct)
        # What the step that started the calls saw: input appended during their bodies is
        # seen by the commit below and taken before the next model call (``_model_phase``).
        await self._claim_input(new_turn=False, committed=True)
        await self.end.save()
        return None

    def read_result(self, ref: str) -> str | None:
        """A result of this run that is not in the context in full (offloaded or cleared)."""
        record = self.state.calls.get(ref)
        if record is None or self.agent.context is None:
            return None
        if ref in verbatim_refs(self.state.context):
            return None
        return record.result if record.result is not None else record.error

    async def _input_pending(self) -> bool:
        return bool(await self.store.pending(self.state.run_id, self.state.cp.claimed_through))

    # -- input -----------------------------------------------------------------------------

    async def _claim_input(
        self, *, new_turn: bool, committed: bool = False, claim: Claim | None = None
    ) -> bool:
        """Take new input into the context; whether anything new entered it.

        ``committed``: what the last step's commit said waits in the feed will do (when the
        store said); else the feed is read now. Only where input appended since that commit
        is still taken at the next safe point: never before a run ends. ``claim``: the feed
        as the caller already claimed it (``fresh_input``).
        """
        waiting = self.end.feed if committed else None
        fresh = await fresh_input(self.store, self.state, waiting, claim)
        self.end.feed = None  # the claimed position moved: the answer is spent
        if fresh:
            take_input(
                self.state,
                fresh,
                new_turn=new_turn,
                max_turns=self.limits.max_turns,
                at=self.clock(),
            )
            await self._claimed(fresh)
        return bool(fresh)

    async def _claimed(self, fresh: Fresh) -> None:
        """Tell the extensions what input the run just took (main runs only)."""
        if self.ext is not None and not self.subagent:
            taken = self.state.context[-len(fresh.messages) :]
            await self.ext.claimed(self.state.run_id, taken)
