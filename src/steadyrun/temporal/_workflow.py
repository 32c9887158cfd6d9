"""``AgentWorkflow``: one steadyrun run as a Temporal workflow.

The workflow runs steadyrun's own loop (``Execution``: turns, admission, batches scheduled by
concurrency keys, recovery, answers, completions, guards, corrections) deterministically. Its
store is a ``MemoryStore`` inside the workflow, rebuilt by replay; every write to it is also
queued for the app's store, where a ``steadyrun.record`` activity applies it. Model calls and
tool bodies are activities; people and systems reach the run through updates and a signal,
and read it through queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import to_plain
    from steadyrun._errors import UsageError
    from steadyrun._texts import Texts
    from steadyrun.background import Task
    from steadyrun.media import MediaOptions
    from steadyrun.records import CallRecord, RunSnapshot
    from steadyrun.runtime import Agent, PendingItem, RunResult
    from steadyrun.runtime._observers import ObserverSet
    from steadyrun.runtime._state import RunState
    from steadyrun.stores import FeedMessage
    from steadyrun.stream import DisplaySnapshot, display_from_run
    from steadyrun.temporal._ahead import refusing_updates
    from steadyrun.temporal._background import SIGNAL_TASK_UPDATES, TaskUpdates
    from steadyrun.temporal._folds import ONE_JOB_EACH
    from steadyrun.temporal._handover import handover_in_activity
    from steadyrun.temporal._payloads import (
        ACTIVITY_LOAD,
        SIGNAL_SUBAGENT_TURN,
        WORKFLOW_NAME,
        AnswerArgs,
        Carried,
        DecideArgs,
        Loaded,
        RunInput,
        RunOutput,
        SendArgs,
        SettleArgs,
        SubagentTurn,
    )
    from steadyrun.temporal._subagents import delegations
    from steadyrun.temporal._taskrecords import RECORDED_UPDATES
    from steadyrun.temporal._wcalls import Engine, NoMedia, WorkflowExecution
    from steadyrun.temporal._wchildren import ChildSide, ChildTurns, output_of
    from steadyrun.temporal._wshared import child_extensions, plain, shared_states
    from steadyrun.temporal._wstore import (
        CANCELLED,
        TASK_RECORDS,
        ContinueAsNew,
        DryStore,
        Recorder,
        WorkflowHost,
        WorkflowStore,
        run_now,
    )
    from steadyrun.temporal._wtasks import WorkflowTasks

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView, TemporalOptions

__all__ = ["AgentWorkflow", "app_for", "register_app"]

T = TypeVar("T")

_APPS: dict[str, AppView] = {}
_DEFAULT: list[AppView] = []


def register_app(task_queue: str | None, app: AppView) -> None:
    """Make ``app`` the one workflows of ``task_queue`` resolve agents in.

    ``None`` registers it as the fallback (the replayer, which has no task queue of its own).
    """
    if task_queue is None:
        _DEFAULT[:] = [app]
    else:
        _APPS[task_queue] = app


def app_for(task_queue: str) -> AppView:
    """The app registered for ``task_queue`` (or the fallback)."""
    app = _APPS.get(task_queue) or (_DEFAULT[0] if _DEFAULT else None)
    if app is None:
        raise ApplicationError(
            f"no TemporalApp is registered for task queue {task_queue!r} in this worker",
            non_retryable=True,
        )
    return app


# -- the workflow -------------------------------------------------------------------------


def _usage_error(exc: Exception) -> ApplicationError:
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


def _refuse_if_ahead(run_id: str) -> None:
    """Refuse an update while a query has run this workflow ahead of its history.

    Accepted now, it would not replay (see ``steadyrun.temporal._ahead``); asked again once
    the workflow task that carries the held commands completes, it is accepted. Validators
    never run on replay, so this read of the worker's state cannot change a replay.
    """
    if refusing_updates(workflow.info().run_id):
        raise ApplicationError(
            f"run {run_id!r} is being brought up to date by its worker; try again in a moment",
            type="RunBusyError",
        )


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """One steadyrun run: the agent's loop, with people and systems reaching it by updates.

    Updates: ``decide`` (``DecideArgs``), ``answer`` (``AnswerArgs``), ``settle``
    (``SettleArgs``), ``send`` (``SendArgs``); each is validated first and a refusal (the same
    typed errors as ``Runtime``: ``NotPendingError``, ``ConflictError``, ...) is returned to the
    caller without entering the history. Signal: ``input`` (``SendArgs``, steering input).
    Queries: ``pending`` (``PendingItem`` plain data), ``snapshot`` (``DisplaySnapshot`` plain
    data), ``status``.
    """

    def __init__(self) -> None:
        self._store: WorkflowStore | None = None
        self._host: WorkflowHost | None = None
        self._dry: WorkflowHost | None = None
        self._run_id = ""
        self._agent: Agent | None = None
        self._subagent = False
        self._changed = False
        self._ready = False  # the run's state is in the store: host writes may apply
        self._refused: str | None = None  # why a restarted run could not be loaded
        self._tasks: WorkflowTasks | None = None
        self._children: ChildTurns | None = None  # sub-agents whose delegation returned
        self._child: ChildSide | None = None  # this sub-agent's side, when it may stay
        self._cancelled_by: str | None = None  # who asked, told just before the cancel

    # -- run --------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: RunInput) -> RunOutput:
        """Drive the run until it completes or fails, waiting inside for whatever it awaits."""
        # The marker tells this run's workers to hand its jobs over one per activation,
        # updates last, live and on replay alike: however SDK core groups them (an update a
        # cold worker folds into an empty task's activation, events a legacy query applied
        # first), the commands are the same (``steadyrun.temporal._folds``). Histories from
        # before it have no marker and keep the SDK's grouping.
        workflow.patched(ONE_JOB_EACH)
        app = app_for(workflow.info().task_queue)
        options = app.options
        self._run_id = inp.run_id
        self._subagent = inp.subagent
        recorder = Recorder(
            inp.run_id, app.store is not None, options.record_timeout, options.heartbeat_timeout
        )
        store = WorkflowStore(recorder, options.continue_as_new_after)
        self._store = store
        # A sub-agent's background calls are adopted when its parent takes its result by
        # signal (``RunInput.parent``); else they wait in the foreground, as before.
        adopt = not inp.subagent or inp.parent is not None
        tasks = WorkflowTasks(app, store, self._wake, adopt=adopt)
        tasks.on_end = store.record_task
        tasks.on_change = store.record_task_going
        self._tasks = tasks
        # A task's activity cannot follow the run into a continued workflow run.
        store.hold = lambda: tasks.outstanding
        carried = inp.carried
        starting = inp.resume and bool(inp.agent) and inp.input is not None
        if starting:
            # ``TemporalRuns.start`` for an id Temporal does not know: new, or a run whose
            # closed workflow Temporal forgot (retention) while the app's store keeps it,
            # which then goes on with the input as a new turn, as on the built-in engine.
            # (No history before this combination: a local activity, no patch needed.)
            carried = None
            if app.store is not None:
                carried = await self._load(options, missing_ok=True, local=True)
            if carried is not None and carried.snapshot["run"]["agent"] != inp.agent:
                owner = carried.snapshot["run"]["agent"]
                raise ApplicationError(
                    f"run {inp.run_id!r} belongs to agent {owner!r}, not {inp.agent!r}",
                    type="UsageError",
                    non_retryable=True,
                )
        elif inp.resume:
            # With an agent (a start for an ended workflow id) a run the store lacks is new.
            carried = await self._load(options, missing_ok=bool(inp.agent))
        agent_name = inp.agent
        if carried is not None and not agent_name:
            agent_name = carried.snapshot["run"]["agent"]
        try:
            view = app.agent(agent_name)  # a child's has its parent's extensions (_wshared)
        except KeyError as exc:
            # A failure of the workflow (not of its task, which Temporal would retry forever).
            raise ApplicationError(str(exc), type="UsageError", non_retryable=True) from None
        self._agent = agent = plain(view)
        texts = app.texts or Texts()
        children = ChildTurns(inp.run_id, store, delegations(agent), texts, self._wake)
        self._children = children
        if inp.subagent and inp.parent is not None:
            self._child = ChildSide(inp.parent, inp.run_id, store, tasks, lambda: self._changed)
        self._host = WorkflowHost(store, agent)
        self._dry = WorkflowHost(DryStore(store), agent)
        generation = 0
        if carried is not None:
            await store.restore(inp.run_id, carried)
            tasks.restore(carried.tasks, carried.task_updates)
            children.restore(carried)
            generation = carried.generation
        if inp.input is not None and not (inp.subagent and carried is not None):
            # A new run's first message is ``<run>:input``, as ``Runtime.run`` names it; input
            # for a run that goes on gets an id of its own (that one is taken). A sub-agent
            # started again goes on from the store without its task again (``_subagents``).
            default_id = f"{inp.run_id}:input" if carried is None else workflow.uuid4().hex
            await store.append(
                inp.run_id, FeedMessage(id=inp.input_id or default_id, content=inp.input)
            )
        elif carried is None and not inp.resume:
            raise ApplicationError("a new run needs input", type="UsageError", non_retryable=True)
        self._ready = True
        if inp.resume:
            # Input that restarted the run (an update with the start) is in the feed first.
            await workflow.wait_condition(workflow.all_handlers_finished)
        recorder.start()
        if inp.cancel:
            # A failed run, cancelled as the built-in engine cancels it: marked cancelled in
            # the app's store, so nothing resumes it (histories from before decode it False).
            by = inp.cancelled_by
            why = f"{CANCELLED} by {by}" if by is not None else CANCELLED
            await store.cancel(inp.run_id, workflow.now(), why, by=by)
            await recorder.drain()
            return RunOutput(run_id=inp.run_id, status="cancelled", generations=generation)
        engine = Engine.of(app, view if inp.shared is not None else agent, shared=inp.shared)
        engine.tasks = tasks
        engine.children = children
        try:
            result = await self._drive(engine, texts, new=carried is None, generation=generation)
        except ContinueAsNew:
            await workflow.wait_condition(workflow.all_handlers_finished)
            await recorder.drain()
            carried = await self._carry(generation + 1)
            workflow.continue_as_new(
                RunInput(
                    agent=agent.name,
                    run_id=inp.run_id,
                    carried=carried,
                    subagent=inp.subagent,
                    parent=inp.parent,  # a sub-agent still signals its parent
                    shared=inp.shared,
                )
            )
        except asyncio.CancelledError:
            # The workflow was cancelled (or its parent's was): the store shows it cancelled,
            # its open calls settled ``cancelled``, as the built-in service's cancel does.
            tasks.cancel_all()
            if workflow.patched(TASK_RECORDS):  # each ends cancelled, recorded so
                await tasks.ended_all()
            by = self._cancelled_by
            await children.cancel_all(by)
            why = f"{CANCELLED} by {by}" if by is not None else CANCELLED
            await store.cancel(self._run_id, workflow.now(), why, by=by)
            await recorder.drain()
            raise
        await workflow.wait_condition(workflow.all_handlers_finished)
        await recorder.drain()
        return output_of(result, generation, subagent=inp.subagent, shared=shared_states(engine))

    async def _load(
        self, options: TemporalOptions, *, missing_ok: bool, local: bool = False
    ) -> Carried | None:
        """The run's last saved step, from the app's store (a run whose workflow had ended).

        ``local``: as a local activity (a marker in the history, no activity task of the
        server's), for the start of a run that is most often new.
        """
        retry = RetryPolicy(
            maximum_interval=timedelta(seconds=30), non_retryable_error_types=["UsageError"]
        )
        loaded: Loaded
        if local:
            loaded = await workflow.execute_local_activity(
                ACTIVITY_LOAD,
                self._run_id,
                result_type=Loaded,
                start_to_close_timeout=options.record_timeout,
                retry_policy=retry,
            )
        else:
            loaded = await workflow.execute_activity(
                ACTIVITY_LOAD,
                self._run_id,
                result_type=Loaded,
                start_to_close_timeout=options.record_timeout,
                heartbeat_timeout=options.heartbeat_timeout,
                retry_policy=retry,
            )
        kind = "RunNotFoundError"
        if loaded.carried is None and missing_ok:
            return None
        if loaded.carried is None:
            self._refused = f"the app's store has no run {self._run_id!r} to continue"
        elif loaded.carried.snapshot["run"]["status"] == "cancelled":
            self._refused = f"run {self._run_id!r} was cancelled; it is not resumed"
            kind = "RunCancelledError"
        if self._refused is not None:
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(self._refused, type=kind, non_retryable=True)
        return loaded.carried

    async def _drive(
        self, engine: Engine, texts: Texts, *, new: bool, generation: int = 0
    ) -> RunResult:
        store, agent, tasks, children = self._store, self._agent, self._tasks, self._children
        assert store is not None and agent is not None and tasks is not None
        assert children is not None
        while True:
            self._changed = False
            if new:
                state = RunState.new(self._run_id, agent.name, workflow.now())
            else:
                snap = await store.load(self._run_id)
                assert snap is not None
                state = RunState.restore(snap)
            execution = WorkflowExecution(
                engine=engine,
                state=state,
                agent=agent,
                store=store,
                observers=ObserverSet([]),
                texts=texts,
                clock=workflow.now,
                media=MediaOptions(),
                media_preparer=NoMedia(MediaOptions(), texts),
                can_suspend=not self._subagent,
                subagent=self._subagent,
                on_handover=handover_in_activity(engine.app),
                extensions=child_extensions(engine, state, new=new),
            )
            with children.running(execution):  # children's later turns reach it as it goes
                result = await (execution.start() if new else execution.resume())
            new = False
            if self._subagent:
                child = self._child
                if child is not None and await child.turn_ended(result, generation, engine):
                    continue  # a task's ending: a new turn, signalled to the parent
                return result
            if result.status == "completed" and (tasks.held or children.outstanding):
                if await store.pending(self._run_id, 0):
                    continue  # a task's ending arrived as the turn ended: a new turn takes it
                if tasks.outstanding or children.outstanding:
                    # Completed with background tasks going: the workflow owns their
                    # activities, so it stays, and each ending wakes the run for a new turn
                    # (as the built-in engine's worker resumes a run its feed woke).
                    await workflow.wait_condition(lambda: self._changed)
                    continue
            if result.status != "suspended":
                if tasks.outstanding or children.outstanding:
                    # A failed run's tasks run to their end (their activities are the
                    # workflow's); the run is told, and takes it when resumed.
                    await workflow.wait_condition(
                        lambda: not tasks.outstanding and not children.outstanding
                    )
                return result
            # Suspended: wait here, holding no worker, until a person or system answers.
            await workflow.wait_condition(lambda: self._changed)

    def _wake(self) -> None:
        """Something new for the run (a background task's ending or question)."""
        self._changed = True

    async def _carry(self, generation: int) -> Carried:
        store, tasks = self._store, self._tasks
        assert store is not None and tasks is not None
        snap = await store.load(self._run_id)
        assert snap is not None
        return Carried(
            **(self._children.carried(snap) if self._children is not None else {}),  # settles snap
            snapshot=to_plain(snap, RunSnapshot),
            feed=[to_plain(m, FeedMessage) for m in store.feed],
            consumed=store.consumed_through,
            generation=generation,
            feed_offset=store.feed_offset,
            tasks=tasks.carried(),
            task_updates=tasks.carried_updates(RECORDED_UPDATES),
        )

    # -- updates ----------------------------------------------------------------------------

    def _check(self, write: Callable[[WorkflowHost], Coroutine[Any, Any, Any]]) -> None:
        _refuse_if_ahead(self._run_id)
        if not self._ready or self._dry is None:
            raise ApplicationError(
                f"run {self._run_id!r} is being loaded to continue; try again in a moment",
                type="RunBusyError",
            )
        try:
            run_now(write(self._dry))
        except UsageError as exc:
            raise _usage_error(exc) from None

    async def _apply(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            value = await coro
        except UsageError as exc:
            raise _usage_error(exc) from None
        self._changed = True
        return value

    @workflow.update
    async def decide(self, args: DecideArgs) -> dict[str, Any]:
        """Approve or reject a call waiting for a decision; returns the record."""
        assert self._host is not None
        record = await self._apply(self._host.decide(self._run_id, args.call_id, **args.decision()))
        return to_plain(record, CallRecord)  # type: ignore[no-any-return]

    @decide.validator
    def _validate_decide(self, args: DecideArgs) -> None:
        self._check(lambda dry: dry.decide(self._run_id, args.call_id, **args.decision()))

    @workflow.update
    async def answer(self, args: AnswerArgs) -> dict[str, Any]:
        """Answer an input request (or a background task's question) by its wait id.

        Returns the record of the call (of the task's call).
        """
        assert self._host is not None and self._tasks is not None and self._store is not None
        held = self._tasks.asked(args.wait_id, args.response)
        if held is not None:
            self._tasks.answer(held, args.response, by=args.by)
            call = await self._store.load_call(self._run_id, held.task.call_id)
            return to_plain(call, CallRecord)  # type: ignore[no-any-return]
        record = await self._apply(
            self._host.answer(self._run_id, args.wait_id, args.response, by=args.by)
        )
        return to_plain(record, CallRecord)  # type: ignore[no-any-return]

    @answer.validator
    def _validate_answer(self, args: AnswerArgs) -> None:
        if self._tasks is not None:
            try:
                if self._tasks.asked(args.wait_id, args.response) is not None:
                    return
            except UsageError as exc:
                raise _usage_error(exc) from None
        self._check(lambda dry: dry.answer(self._run_id, args.wait_id, args.response, by=args.by))

    @workflow.update
    async def settle(self, args: SettleArgs) -> dict[str, Any]:
        """Record the outcome of a call the host owns (an awaited result); returns the record."""
        assert self._host is not None
        record = await self._apply(
            self._host.settle(
                self._run_id, args.call_id, result=args.result, error=args.error, by=args.by
            )
        )
        return to_plain(record, CallRecord)  # type: ignore[no-any-return]

    @settle.validator
    def _validate_settle(self, args: SettleArgs) -> None:
        self._check(
            lambda dry: dry.settle(
                self._run_id, args.call_id, result=args.result, error=args.error, by=args.by
            )
        )

    @workflow.update
    async def send(self, args: SendArgs) -> dict[str, Any]:
        """Input for the run, taken at its next safe point; returns the feed message."""
        await workflow.wait_condition(lambda: self._ready or self._refused is not None)
        if self._refused is not None:
            kind = "RunCancelledError" if "cancelled" in self._refused else "RunNotFoundError"
            raise ApplicationError(self._refused, type=kind)
        assert self._store is not None
        message = await self._apply(self._store.append(self._run_id, args.message()))
        return to_plain(message, FeedMessage)  # type: ignore[no-any-return]

    @send.validator
    def _validate_send(self, args: SendArgs) -> None:
        _refuse_if_ahead(self._run_id)
        if not args.id or args.role not in ("user", "system"):
            raise ApplicationError(
                "input needs an id and the role user or system", type="UsageError"
            )

    @workflow.signal(name="cancelling")
    def cancelling(self, by: str) -> None:
        """Who cancels the run: sent just before Temporal's cancel, which carries no principal.

        Signals are applied before a cancel in the same workflow task, and a replay sees it
        in the history as the first execution did.
        """
        self._cancelled_by = by

    @workflow.signal(name="input")
    async def input(self, args: SendArgs) -> None:
        """Steering input as a signal (fire and forget; a message without an id is dropped)."""
        if not args.id or args.role not in ("user", "system") or self._store is None:
            workflow.logger.warning("input signal without an id or with a bad role dropped")
            return
        await workflow.wait_condition(lambda: self._ready or self._refused is not None)
        if self._refused is not None:
            return
        await self._apply(self._store.append(self._run_id, args.message()))

    @workflow.signal(name=SIGNAL_SUBAGENT_TURN)
    async def subagent_turn(self, turn: SubagentTurn) -> None:
        """A sub-agent's turn that ended with its background tasks going, or a later one."""
        await workflow.wait_condition(lambda: self._ready)
        if self._children is not None:
            await self._children.take(turn)

    @workflow.signal(name=SIGNAL_TASK_UPDATES)
    def task_updates(self, args: TaskUpdates) -> None:
        """Progress updates of a background task, from its activity."""
        if self._tasks is not None:
            self._tasks.add_updates(args)

    # -- queries ----------------------------------------------------------------------------

    @workflow.query
    def pending(self) -> list[dict[str, Any]]:
        """What the run waits for (decisions, inputs, awaited results), in call order."""
        if self._host is None:
            return []
        items = run_now(self._host.pending(self._run_id))
        if self._tasks is not None:
            items = [*items, *self._tasks.questions()]
        return to_plain(items, list[PendingItem])  # type: ignore[no-any-return]

    @workflow.query
    def host_write(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """The update ``name`` (``decide``, ``answer``, ``settle``) computed now, never stored.

        ``args`` are the update's arguments as plain data. Returns ``{"record": ...,
        "changed": ...}`` (the call as the write would leave it, and whether it would change
        it) or the refusal, ``{"error": <type name>, "message": ...}``; ``{}`` when it cannot
        tell. A workflow that ended takes no update: ``TemporalRuns`` asks it this instead, so
        a late write is answered as ``Runtime`` answers it (a repeat accepted, another refused).
        """
        dry = self._dry
        if dry is None or self._store is None:
            return {}
        write: Coroutine[Any, Any, CallRecord]
        if name == "decide":
            decision = DecideArgs(**args)
            write = dry.decide(self._run_id, decision.call_id, **decision.decision())
        elif name == "answer":
            answer = AnswerArgs(**args)
            write = dry.answer(self._run_id, answer.wait_id, answer.response)
        elif name == "settle":
            outcome = SettleArgs(**args)
            write = dry.settle(
                self._run_id, outcome.call_id, result=outcome.result, error=outcome.error
            )
        else:
            return {}
        try:
            record = run_now(write)
        except UsageError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}
        stored = run_now(self._store.load_call(self._run_id, record.id))
        return {"record": to_plain(record, CallRecord), "changed": record != stored}

    @workflow.query
    def tasks(self) -> list[dict[str, Any]]:
        """The run's background tasks (``Task`` plain data), in the order they were adopted."""
        if self._tasks is None:
            return []
        held = [h.task for h in self._tasks.held.values()]
        return to_plain(held, list[Task])  # type: ignore[no-any-return]

    @workflow.query
    def snapshot(self) -> dict[str, Any]:
        """The display snapshot (what the web page shows), as plain data."""
        if self._store is None or self._agent is None:
            return {}
        snap = run_now(self._store.load(self._run_id))
        if snap is None:
            return {}
        display = display_from_run(snap, strict_settlement=self._agent.strict_settlement)
        return to_plain(display, DisplaySnapshot)  # type: ignore[no-any-return]

    @workflow.query
    def status(self) -> str:
        """The run's status (``running``, ``suspended``, ``completed``, ``failed``)."""
        if self._store is None:
            return "running"
        snap = run_now(self._store.load(self._run_id))
        return snap.run.status if snap is not None else "running"
