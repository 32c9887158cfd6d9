"""Where a drive of a run stops, and the saves on the way: the ends of the run state machine.

``Endings`` makes the status changes of the table in ``_loop``'s docstring that end a drive:
``complete`` (``done``/completed), ``suspend`` (suspended, in the phase it is in), ``fail``
(failed, likewise), and the agent's policies that choose between them (a fallback completion,
a used-up budget). Each saves a step and returns the ``RunResult`` the caller gets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from steadyrun._errors import (
    BudgetExceeded,
    CorrectionsExhausted,
    RunFailure,
    StoreError,
    failure_from_record,
)
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._budgets import account_usage, held_budget
from steadyrun.runtime._completion import FallbackReason
from steadyrun.runtime._extset import EXT_STATE, ExtensionSet
from steadyrun.runtime._lengthcut import finish_reason
from steadyrun.runtime._observers import ObserverSet
from steadyrun.runtime._result import RunResult
from steadyrun.runtime._state import RunState
from steadyrun.stores import Store
from steadyrun.stores._leases import LeaseLostError, late_outcome

__all__ = ["Endings"]


@dataclass(kw_only=True, slots=True)
class Endings:
    """The endings and saves of one run's drive.

    Attributes:
        state: The run's state.
        agent: Its agent (fallback completion, corrections, budget policy, prices).
        store: Where steps are saved and input consumed.
        observers: Told of publications; their errors go into the result.
        clock: The run's clock.
        ext: The run's extensions, if any.
        subagent: Whether the run is a sub-agent's (its extensions belong to the parent).
    """

    state: RunState
    agent: Agent
    store: Store
    observers: ObserverSet
    clock: Callable[[], datetime]
    ext: ExtensionSet | None
    subagent: bool
    announce: Callable[[], Awaitable[None]] | None = None
    """Tells the observers what the saved step settled (``CallRunner.announce``)."""
    feed: int | None = None
    """What the last step's commit said waits in the run's feed above its claimed position
    (``Journal.save_step``): the highest claimable sequence number, 0 for none, ``None`` when
    the store does not say or the run claimed input since."""

    async def complete(
        self, text: str, *, completion: Any = None, reason: FallbackReason | None = None
    ) -> RunResult:
        """-> ``done``/completed with ``text`` (and a completion value); input consumed."""
        state = self.state
        state.run.status = "completed"
        state.run.text = text
        state.run.completion = completion
        state.run.completion_reason = reason
        state.run.error_kind = state.run.error = None
        state.cp.phase = "done"
        state.cp.batch = []
        if self.ext is not None and not self.subagent:
            await self.ext.notify("on_complete", state.run_id, list(state.context))
        await self.save()
        await self.store.consume(state.run_id, state.cp.claimed_through)
        return self.result()

    async def fallback(self, reason: FallbackReason) -> RunResult:
        """End the run with the agent's fallback completion, fixed, saying why."""
        fallback = self.agent.completion_fallback
        assert fallback is not None
        value = fallback(reason)
        return await self.complete("", completion=value, reason=reason)

    async def out_of_corrections(self, reason: FallbackReason, what: str) -> RunResult:
        """A correction is needed and none is left: the fallback completion, else failed."""
        if self.agent.completion_fallback is not None:
            return await self.fallback(reason)
        return await self.fail(
            CorrectionsExhausted(
                f"{what} and the run has used its {self.agent.limits.corrections} "
                "correction(s); raise Limits.corrections or give the agent a completion_fallback"
            )
        )

    async def over_budget(self, exceeded: BudgetExceeded) -> RunResult:
        """A budget is used up: suspended until it is raised, or failed."""
        # A sub-agent run cannot suspend: its delegation would wait on nothing.
        if self.subagent or self.agent.limits.on_budget == "fail":
            return await self.fail(exceeded)
        return await self.suspend()

    async def suspend(self) -> RunResult:
        """-> suspended, in the phase the run is in."""
        self.state.run.status = "suspended"
        await self.save()
        return self.result()

    async def fail(self, failure: RunFailure) -> RunResult:
        """-> failed, in the phase the run is in; resuming tries again from there."""
        state = self.state
        state.run.status = "failed"
        state.run.error_kind = type(failure).__name__
        state.run.error = str(failure)
        await self.save()
        return self.result()

    async def save(self) -> None:
        """Save a step: every change since the last one, with the extensions' states."""
        state = self.state
        if self.ext is not None and not self.subagent:
            state.cp.extra[EXT_STATE] = self.ext.all_states()
            state.run.usage = state.run.usage + self.ext.take_usage()
        account_usage(state, self.agent)  # priced per model in the step it is saved in
        step = state.take_step(self.clock())
        self.feed = None
        try:
            self.feed = await self.store.save_step(state.run_id, step)
        except LeaseLostError:
            # Settled calls ride with the step; a lost claim refuses the step, not them:
            # they are the only word on what their bodies did (``late_outcome``).
            for call in step.calls:
                if late_outcome(call):
                    with contextlib.suppress(StoreError):
                        await self.store.save_call(state.run_id, call)
            raise
        if self.announce is not None:
            await self.announce()
        if self.ext is not None and not self.subagent:
            for name, value in self.ext.changed_publications().items():
                await self.observers.emit("on_publish", state.run_id, name, value)

    def result(self) -> RunResult:
        """What the drive returns: the run as it now stands."""
        run = self.state.run
        status = run.status if run.status != "running" else "suspended"
        error = None
        if run.status == "failed" and run.error_kind:
            error = failure_from_record(run.error_kind, run.error or "")
        return RunResult(
            run_id=run.run_id,
            status=status,
            text=run.text if run.status == "completed" else None,
            completion=run.completion,
            completion_reason=run.completion_reason,
            finish_reason=finish_reason(self.state.cp),
            usage=run.usage,
            calls=list(self.state.calls.values()),
            blocks=list(self.state.blocks),
            error=error,
            budget_exceeded=held_budget(self.state.cp),
            messages=list(self.state.context),
            observer_errors=self.observers.errors,
            extensions=self.ext.published() if self.ext is not None else {},
        )
