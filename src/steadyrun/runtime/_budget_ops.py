"""The host's budget operations: what a run used against its budgets, and raising them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from steadyrun._errors import RunCancelledError, RunNotFoundError
from steadyrun.records import RunSnapshot
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._budgets import Budget, BudgetStatus, budget_status, held_budget, raise_in
from steadyrun.runtime._state import RunState
from steadyrun.stores import Store

__all__ = ["BudgetOperations"]


class BudgetOperations:
    """``budget`` and ``raise_budget``; mixed into ``Runtime``."""

    store: Store
    _clock: Callable[[], datetime]

    def _agent_for(self, snap: RunSnapshot) -> Agent | None:  # pragma: no cover - Runtime's
        raise NotImplementedError

    def _executing(
        self, run_id: str, wait: float
    ) -> AbstractAsyncContextManager[None]:  # pragma: no cover - Runtime's
        raise NotImplementedError

    async def budget(self, run_id: str) -> BudgetStatus:
        """The run's budgets in force and what it used against them (its cost, say).

        Raises:
            RunNotFoundError: No such run.
        """
        snap = await self.store.load(run_id)
        if snap is None:
            raise RunNotFoundError(run_id)
        return budget_status(snap.run.usage, snap.checkpoint, snap.calls, self._agent_for(snap))

    async def raise_budget(
        self,
        run_id: str,
        *,
        budget: Budget | None = None,
        turn_budget: Budget | None = None,
        wait: float = 0.0,
    ) -> BudgetStatus:
        """Give one run more budget than its agent's ``Limits``; then resume it.

        The limits ``budget`` (for the run) and ``turn_budget`` (for each turn) set replace
        the agent's for this run, and those raised before; the limits they leave ``None``
        stay as they were. They are stored with the run, so they hold across resumes and
        processes. A run a budget stopped is woken, so a worker resumes it.

        Args:
            run_id: The run.
            budget: Limits for the whole run.
            turn_budget: Limits for each turn.
            wait: Seconds to wait for the run's claim when another executor holds it.

        Returns:
            The run's budgets in force now, and what it used.

        Raises:
            RunNotFoundError: No such run.
            RunCancelledError: The run was cancelled.
            RunBusyError: Another executor holds the run's claim (after ``wait``).
            UsageError: Neither budget given, or a cost budget without prices.
        """
        async with self._executing(run_id, wait):
            snap = await self.store.load(run_id)
            if snap is None:
                raise RunNotFoundError(run_id)
            if snap.run.status == "cancelled":
                raise RunCancelledError(f"run {run_id!r} was cancelled; its budget stays")
            agent = self._agent_for(snap)
            state = RunState.restore(snap)
            raise_in(state.cp, agent.limits if agent else None, budget, turn_budget)
            # A step of its own, under the run's claim: the raise is durable and fenced.
            await self.store.save_step(run_id, state.take_step(self._clock()))
            stopped = held_budget(state.cp) is not None
        if stopped:
            await self.store.leases.wake(run_id)
        return budget_status(state.run.usage, state.cp, list(state.calls.values()), agent)
