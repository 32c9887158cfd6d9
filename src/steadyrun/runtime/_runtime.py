"""``Runtime``: runs agents on a store, and the host's operations on runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from steadyrun._errors import RunCancelledError, RunNotFoundError, UsageError
from steadyrun.chat import MediaPart, Message
from steadyrun.media import MediaOptions, MediaPreparer
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._calls import HandoverHook
from steadyrun.runtime._host import HostOperations, PendingItem
from steadyrun.runtime._loop import Execution
from steadyrun.runtime._observers import Observer, ObserverSet
from steadyrun.runtime._result import RunResult
from steadyrun.runtime._state import RunState
from steadyrun.runtime._texts import Texts
from steadyrun.stores import FeedMessage, Store

__all__ = ["PendingItem", "RunCancelledError", "Runtime"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Runtime(HostOperations):
    """Runs agents durably on a store.

    Args:
        store: Where runs are kept (``MemoryStore`` for tests; a durable store in production).
        agents: Agents this runtime can resume by name; agents passed to ``run`` are added.
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
    ) -> None:
        self.store = store
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            self._register(agent)
        self._observers = list(observers)
        self.texts = texts or Texts()
        self._clock = clock
        self._new_id = new_id
        self._active: set[str] = set()
        self._on_handover = on_handover
        self.media = media
        self._media = MediaPreparer(media or MediaOptions(), self.texts)
        self.host_failure_details = host_failure_details

    def _register(self, agent: Agent) -> None:
        known = self._agents.get(agent.name)
        if known is not None and known is not agent:
            raise UsageError(
                f"two different agents are named {agent.name!r}; runs find their agent by name, "
                "so names must be unique within a runtime"
            )
        self._agents[agent.name] = agent

    async def run(
        self,
        agent: Agent,
        *,
        run_id: str,
        input: str | Message | None = None,
        input_id: str | None = None,
    ) -> RunResult:
        """Run ``agent`` until the run completes, suspends or fails.

        A new run needs ``input``. For a run that exists, ``input`` (if any) is sent to it and
        the run is resumed, so ``run`` also continues a conversation.

        Args:
            agent: The agent to run.
            run_id: Your id for the run (a ticket, a session...).
            input: The user's message.
            input_id: Id of that message for deduplication; a retry with the same id does not
                add it twice. Defaults to ``"<run_id>:input"`` for a new run.
        """
        self._register(agent)
        snap = await self.store.load(run_id)
        if snap is not None:
            if snap.run.agent != agent.name:
                raise UsageError(
                    f"run {run_id!r} belongs to agent {snap.run.agent!r}, not {agent.name!r}"
                )
            if input is not None:
                await self.send(run_id, input, id=input_id)
            return await self.resume(run_id, agent=agent)
        if input is None:
            raise UsageError(f"run {run_id!r} is new and needs input: pass input='...'")
        message_id = input.id if isinstance(input, Message) else None
        await self.send(run_id, input, id=input_id or message_id or f"{run_id}:input")
        state = RunState.new(run_id, agent.name, self._clock())
        async with self._driving(run_id):
            return await self._execution(state, agent).start()

    async def resume(self, run_id: str, *, agent: Agent | None = None) -> RunResult:
        """Continue a suspended, failed or crashed run from its last checkpoint.

        Started calls that never settled are settled by their traits first (``interrupted`` or
        ``needs_review``); nothing with side effects runs twice. A completed run with no new
        input returns its stored result.
        """
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        if snap.run.status == "cancelled":
            raise RunCancelledError(f"run {run_id!r} was cancelled; it is not resumed")
        if agent is not None:
            self._register(agent)
        found = self._agents.get(snap.run.agent)
        if found is None:
            raise UsageError(
                f"run {run_id!r} belongs to agent {snap.run.agent!r}, which this runtime does not "
                "know: pass agent=... or Runtime(store, agents=[...])"
            )
        async with self._driving(run_id):
            return await self._execution(RunState.restore(snap), found).resume()

    async def send(
        self,
        run_id: str,
        message: str | Message,
        *,
        id: str | None = None,
        revision: str | None = None,
    ) -> FeedMessage:
        """Append input to a run's feed; a running run takes it at its next safe point.

        A message with the same ``id`` and ``revision`` as one already sent is not added
        again; a new ``revision`` of an id is new input.
        """
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
        return await self.store.append(
            run_id,
            FeedMessage(
                id=id or self._new_id(),
                revision=revision or "1",
                role=role,
                content=content,
                media=media,
            ),
        )

    def _execution(self, state: RunState, agent: Agent) -> Execution:
        return Execution(
            state=state,
            agent=agent,
            store=self.store,
            observers=ObserverSet(self._observers),
            texts=self.texts,
            clock=self._clock,
            on_handover=self._on_handover,
            media=self.media,
            media_preparer=self._media,
            host_failure_details=self.host_failure_details,
        )

    def _driving(self, run_id: str) -> _Driving:
        return _Driving(self._active, run_id)


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
