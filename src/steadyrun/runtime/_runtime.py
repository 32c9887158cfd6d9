"""``Runtime``: runs agents on a store, and the host's operations on runs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from steadyrun._errors import RunCancelledError, RunNotFoundError, UsageError
from steadyrun._texts import Texts
from steadyrun.chat import MediaPart, Message
from steadyrun.media import MediaOptions, MediaPreparer
from steadyrun.records import RunSnapshot
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._budget_ops import BudgetOperations
from steadyrun.runtime._calls import HandoverHook
from steadyrun.runtime._claims import Claims, check_writable, owner_id
from steadyrun.runtime._events import RunStream
from steadyrun.runtime._fork import ForkOperations
from steadyrun.runtime._host import BY_META, HostOperations, PendingItem
from steadyrun.runtime._live_out import LiveBroadcaster
from steadyrun.runtime._loop import Execution
from steadyrun.runtime._observers import Observer, ObserverSet, extra_observers
from steadyrun.runtime._result import RunResult
from steadyrun.runtime._state import RunState
from steadyrun.runtime._versions import AgentVersions
from steadyrun.stores import Claim, FeedMessage, Store
from steadyrun.stores._live_open import live_feed

__all__ = ["PendingItem", "RunCancelledError", "Runtime"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def default_owner() -> str:
    """An executor id unique on this machine: host, process id and a random suffix."""
    return owner_id(uuid.uuid4().hex[:6])


class Runtime(HostOperations, ForkOperations, BudgetOperations):
    """Runs agents durably on a store.

    Args:
        store: Where runs are kept (``MemoryStore`` for tests; a durable store in production).
        agents: Agents this runtime can resume by name; agents passed to ``run`` are added.
            Several versions of one name may be listed: a run resumes under the version
            whose fingerprint it recorded, else under the last one listed (see
            docs/lifecycle.md, "Agent versions").
        observers: Callbacks on model responses and tool calls; they never change a run.
        texts: The sentences the runtime writes to the model.
        clock: Returns the current time (UTC); tests pass a fixed clock.
        new_id: Returns a fresh unique id (for input messages sent without one).
        on_handover: Called with (run id, record) before a submission or a pending
            confirmation is saved, where the host creates it; raising ``CallRejected`` refuses
            it (the call is recorded ``rejected`` and the model sees the reason).
        media: How media are read (the host's storage) and how much a model call carries;
            see ``steadyrun.media.MediaOptions`` and docs/media.md.
        host_failure_details: Whether the model reads the message of a ``HostFailure`` a
            tool raised (it may name internal systems); the call's record keeps it as its
            ``error`` either way.
        post_settlements: Whether ``settle`` posts the outcome of a detached or submitted
            call to the run's feed, so the model learns it at the run's next turn (without
            it the settlement is recorded for the host only).
        owner: This runtime's id as the executor of runs (in claims and ``RunBusyError``);
            host, process id and a random suffix by default.
        claim_ttl: Seconds a claim on a run lasts unless renewed (it is renewed every third
            of it while the run executes); a run whose executor died is taken over by a
            worker this long after.
        live: Whether runs executed here tell followers in other processes what they do as
            they do it (the model's words as written, each save), over the store's live
            feed (see docs/service.md, "Live streaming"). It costs nothing while nobody
            follows.

    Runs are executed under a claim in the store: one executor per run at a time, across
    runtimes, processes and workers (see docs/stores.md).

    Example:
        ``result = await Runtime(MemoryStore()).run(agent, run_id="t-1", input="Hi")``
    """

    def __init__(
        self,
        store: Store,
        *,
        agents: Iterable[Agent] = (),
        observers: Sequence[Observer] = (),
        texts: Texts | None = None,
        clock: Callable[[], datetime] = _utcnow,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        on_handover: HandoverHook | None = None,
        media: MediaOptions | None = None,
        host_failure_details: bool = True,
        post_settlements: bool = False,
        owner: str | None = None,
        claim_ttl: float = 30.0,
        live: bool = True,
    ) -> None:
        self.store = store
        self.owner = owner or default_owner()
        self.claims = Claims(store.leases, self.owner, claim_ttl)
        self._agents: dict[str, Agent] = {}  # by name: the current version
        self._versions = AgentVersions()
        for agent in agents:
            self._register(agent)
        self._observers = list(observers)
        feed = live_feed(store) if live else None
        if feed is not None:
            # Followers in other processes see fragments and saves as they happen.
            self._observers.append(LiveBroadcaster(feed))
        self.texts = texts or Texts()
        self._clock = clock
        self._new_id = new_id
        self._active: set[str] = set()
        self._on_handover = on_handover
        self.media = media
        self._media = MediaPreparer(media or MediaOptions(), self.texts)
        self.host_failure_details = host_failure_details
        self.post_settlements = post_settlements

    def _register(self, agent: Agent) -> None:
        self._versions.add(agent)
        current = self._versions.current(agent.name)
        assert current is not None
        self._agents[agent.name] = current

    def _agent_for(self, snap: RunSnapshot) -> Agent | None:
        """The version of its agent a stored run resumes under (``None``: not known here)."""
        return self._versions.for_run(snap.run.agent, snap.run.run_id, snap.run.agent_version)

    async def run(
        self,
        agent: Agent,
        *,
        run_id: str,
        input: str | Message | None = None,
        input_id: str | None = None,
        wait: float = 0.0,
    ) -> RunResult:
        """Run ``agent`` until the run completes, suspends or fails.

        A new run needs ``input``. For a run that exists, ``input`` (if any) is sent to it and
        the run is resumed, so ``run`` also continues a conversation. Retrying the same call
        after a crash is safe: while the run's current turn is unfinished (running,
        suspended, or cut off by the crash), the same input again resumes it instead of
        being added a second time; once the run is idle, input starts a new turn.

        Args:
            agent: The agent to run.
            run_id: Your id for the run (a ticket, a session...).
            input: The user's message.
            input_id: Id of that message for deduplication; a retry with the same id does not
                add it twice. Defaults to ``"<run_id>:input"`` for a new run.
            wait: Seconds to wait for the run's claim when another executor holds it.

        Raises:
            RunBusyError: Another executor holds the run's claim (after ``wait``).
        """
        self._register(agent)
        async with self._executing(run_id, wait):
            snap = await self.store.load(run_id)
            if snap is not None:
                if snap.run.agent != agent.name:
                    raise UsageError(
                        f"run {run_id!r} belongs to agent {snap.run.agent!r}, not {agent.name!r}"
                    )
                if input is not None and not _is_retry(snap, input, input_id):
                    _refuse_cancelled(snap)
                    await self._append(run_id, input, id=input_id)  # the feed only: snap holds
                return await self._resume_held(run_id, agent, snap)
            if input is None:
                raise UsageError(f"run {run_id!r} is new and needs input: pass input='...'")
            message_id = input.id if isinstance(input, Message) else None
            await self._append(run_id, input, id=input_id or message_id or f"{run_id}:input")
            state = RunState.new(run_id, agent.name, self._clock())
            return await self._execution(state, agent).start()

    async def resume(
        self, run_id: str, *, agent: Agent | None = None, wait: float = 0.0
    ) -> RunResult:
        """Continue a suspended, failed or crashed run from its last checkpoint.

        Started calls that never settled are settled by their traits first (``interrupted`` or
        ``needs_review``); nothing with side effects runs twice. A completed run with no new
        input returns its stored result.

        Args:
            run_id: The run.
            agent: Its agent, when this runtime was not given it.
            wait: Seconds to wait for the run's claim when another executor holds it.

        Raises:
            RunBusyError: Another executor holds the run's claim (after ``wait``).
            RunNotFoundError: No such run.
            RunCancelledError: The run was cancelled.
        """
        if agent is not None:
            self._register(agent)
        async with self._executing(run_id, wait):
            return await self._resume_held(run_id, agent)

    async def _resume_held(
        self, run_id: str, agent: Agent | None, snap: RunSnapshot | None = None
    ) -> RunResult:
        """Resume under the claim; ``snap`` is the run as loaded under it, if already loaded.

        One load per resume: a long run's load is most of the time to its next model call.
        """
        if snap is None:
            snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        if snap.run.status == "cancelled":
            raise RunCancelledError(f"run {run_id!r} was cancelled; it is not resumed")
        found = self._agent_for(snap)
        if found is None:
            raise UsageError(
                f"run {run_id!r} belongs to agent {snap.run.agent!r}, which this runtime does not "
                "know: pass agent=... or Runtime(store, agents=[...])"
            )
        return await self._execution(RunState.restore(snap), found).resume()

    def stream(
        self,
        agent: Agent,
        *,
        run_id: str,
        input: str | Message | None = None,
        input_id: str | None = None,
        wait: float = 0.0,
        buffer: int = 256,
    ) -> RunStream:
        """``run``, as an async iterator of the run's events while it executes.

        Yields ``RunStarted``, ``ModelCallStarted``, the model's ``TextDelta``,
        ``ThinkingDelta`` and ``ToolArgumentsDelta`` fragments (when its client streams),
        ``ModelCallSettled`` and ``UsageReported``, ``ToolCallStarted``/``ToolCallSettled``,
        ``HandoverPending``, and last ``RunCompleted``, ``RunSuspended`` or ``RunFailed``. With
        ``input`` for a run that exists, the input is sent and the run resumed, as ``run`` does
        (the streaming form of ``send`` and then ``resume``).

        At most ``buffer`` events wait for the reader; past that the run waits for it. Leaving
        the loop early stops the run as a crash would: nothing more is saved, and ``resume``
        continues it from its last saved step (a model call cut off mid-stream is asked
        again). ``async with runtime.stream(...) as events`` (or ``await events.aclose()``)
        waits until it has stopped; after a bare ``break`` it stops on the event loop's next
        turns.

        Args:
            agent: The agent to run.
            run_id: Your id for the run.
            input: The user's message (needed for a new run).
            input_id: Id of that message for deduplication (see ``run``).
            wait: Seconds to wait for the run's claim when another executor holds it.
            buffer: Events held for a slow reader.

        Returns:
            A ``RunStream`` of ``RunEvent``s; the errors of ``run`` are raised from it.
        """
        return RunStream(
            lambda: self.run(agent, run_id=run_id, input=input, input_id=input_id, wait=wait),
            run_id,
            buffer=buffer,
        )

    def stream_resume(
        self, run_id: str, *, agent: Agent | None = None, wait: float = 0.0, buffer: int = 256
    ) -> RunStream:
        """``resume``, as an async iterator of the run's events (see ``stream``).

        Args:
            run_id: The run.
            agent: Its agent, when this runtime was not given it.
            wait: Seconds to wait for the run's claim when another executor holds it.
            buffer: Events held for a slow reader.

        Returns:
            A ``RunStream`` of ``RunEvent``s; the errors of ``resume`` are raised from it.
        """
        return RunStream(lambda: self.resume(run_id, agent=agent, wait=wait), run_id, buffer=buffer)

    def stream_send(
        self,
        run_id: str,
        message: str | Message,
        *,
        id: str | None = None,
        agent: Agent | None = None,
        wait: float = 0.0,
        buffer: int = 256,
    ) -> RunStream:
        """``send`` and then ``resume``, as an async iterator of the run's events.

        The streaming way to continue a conversation; the events are those of ``stream``.

        Args:
            run_id: The run.
            message: The new input.
            id: Its id for deduplication (see ``send``): a repeated id is not added again.
            agent: The run's agent, when this runtime was not given it.
            wait: Seconds to wait for the run's claim when another executor holds it.
            buffer: Events held for a slow reader.

        Returns:
            A ``RunStream`` of ``RunEvent``s; the errors of ``send`` and ``resume`` are
            raised from it.
        """

        async def go() -> RunResult:
            await self.send(run_id, message, id=id)
            return await self.resume(run_id, agent=agent, wait=wait)

        return RunStream(go, run_id, buffer=buffer)

    async def send(
        self,
        run_id: str,
        message: str | Message,
        *,
        id: str | None = None,
        revision: str | None = None,
        by: str | None = None,
    ) -> FeedMessage:
        """Append input to a run's feed; a running run takes it at its next safe point.

        A message with the same ``id`` and ``revision`` as one already sent is not added
        again; a new ``revision`` of an id is new input. ``by`` names who sent it: it is kept
        in the message's meta under ``BY_META`` (also in the run's context).

        Raises:
            RunCancelledError: The run was cancelled; it takes no more input.
        """
        snap = await self.store.load(run_id)
        if snap is not None:
            _refuse_cancelled(snap)
        return await self._append(run_id, message, id=id, revision=revision, by=by)

    async def _append(
        self,
        run_id: str,
        message: str | Message,
        *,
        id: str | None = None,
        revision: str | None = None,
        by: str | None = None,
    ) -> FeedMessage:
        if isinstance(message, Message):
            if message.role not in ("user", "system"):
                raise UsageError(f"input messages are user or system messages, not {message.role}")
            content, role = message.text, message.role
            media = [p.ref for p in message.parts if isinstance(p, MediaPart)]
            id = id or message.id
            revision = revision or message.revision
        elif isinstance(message, str):
            content, role, media = message, "user", []
        else:
            raise UsageError(f"send() takes a str or a Message, got {type(message).__name__}")
        await check_writable(self.store.leases, run_id)  # not into a Temporal run's store
        return await self.store.append(
            run_id,
            FeedMessage(
                id=id or self._new_id(),
                revision=revision or "1",
                role=role,
                content=content,
                media=media,
                meta={BY_META: by} if by is not None else None,
            ),
        )

    def _execution(self, state: RunState, agent: Agent) -> Execution:
        return Execution(
            state=state,
            agent=agent,
            store=self.store,
            observers=ObserverSet([*self._observers, *extra_observers.get()]),
            texts=self.texts,
            clock=self._clock,
            on_handover=self._on_handover,
            media=self.media,
            media_preparer=self._media,
            host_failure_details=self.host_failure_details,
        )

    async def _drive(
        self,
        run_id: str,
        snap: RunSnapshot | None,
        agent: Agent | None,
        first: Claim | None = None,
    ) -> RunResult:
        """A worker's execution under the claim it holds: ``snap`` as it loaded it, if stored.

        A stored run resumes from ``snap`` (its agent found by name, as ``resume`` does); a new
        one starts with ``agent`` from the first input already in its feed (where ``run``
        would load the run and send the input again): ``first``, the feed as the worker
        claimed it to find the agent, is not read again.
        """
        async with self._executing(run_id, 0.0):
            if snap is not None:
                return await self._resume_held(run_id, None, snap)
            if agent is None:
                raise UsageError(f"run {run_id!r} is new: it needs its agent")
            self._register(agent)
            state = RunState.new(run_id, agent.name, self._clock())
            return await self._execution(state, agent).start(first)

    @asynccontextmanager
    async def _executing(self, run_id: str, wait: float) -> AsyncIterator[None]:
        """One execution of ``run_id``: not twice in this runtime, and under its claim."""
        async with _Driving(self._active, run_id), self.claims.executing(run_id, wait=wait):
            yield


def _is_retry(snap: RunSnapshot, input: str | Message, input_id: str | None) -> bool:
    """Whether ``input`` repeats what started the run's unfinished turn (a retried start).

    A run is mid-turn while it is running (or was cut off running) or suspended; a retry of
    ``run(...)`` after a crash then resumes that turn. An idle run (completed, failed) takes
    the same text again as a new turn: a conversation may say "yes" twice.
    """
    if input_id is not None:
        return False  # the feed deduplicates by id itself
    if snap.run.status not in ("running", "suspended"):
        return False
    text = input.text if isinstance(input, Message) else input
    for message in reversed(snap.context):
        if message.role == "user":
            return message.text == text
    return False


class _Driving:
    """Refuses a second execution of the same run inside one runtime."""

    def __init__(self, active: set[str], run_id: str) -> None:
        self._active = active
        self._run_id = run_id

    async def __aenter__(self) -> None:
        if self._run_id in self._active:
            raise UsageError(
                f"run {self._run_id!r} is already executing in this runtime; use send() to give "
                "it input while it works"
            )
        self._active.add(self._run_id)

    async def __aexit__(self, *exc: object) -> None:
        self._active.discard(self._run_id)


def _refuse_cancelled(snap: RunSnapshot) -> None:
    """A cancelled run is never resumed: input sent to it would never be taken."""
    if snap.run.status == "cancelled":
        raise RunCancelledError(f"run {snap.run.run_id!r} was cancelled; it takes no more input")
