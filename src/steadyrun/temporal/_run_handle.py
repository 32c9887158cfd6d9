"""``TemporalRunHandle``: the handle ``TemporalRuns.start`` returns, waiting with typed errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle

from steadyrun.temporal._payloads import RunOutput

__all__ = ["TemporalRunHandle"]


class TemporalRunHandle(WorkflowHandle[Any, RunOutput]):
    """A run's workflow handle whose ``result()`` is ``TemporalRuns.result``.

    Temporal's own ``WorkflowHandle.result`` raises ``temporalio`` errors (a cancelled
    workflow's ``WorkflowFailureError``, an ``RPCError`` for a cluster that does not answer);
    this one waits for the run's end across continue-as-new and new turns as
    ``TemporalRuns.result`` does: a ``RunOutput`` (``failed`` with its ``error_kind`` for a
    workflow that failed, was terminated or timed out), or steadyrun's ``RunCancelledError``,
    ``RunNotFoundError`` or ``EngineUnavailableError``. Everything else (``describe``,
    ``query``, ``signal``, ``cancel``...) is Temporal's handle, for the workflow with the
    run's id.
    """

    def __init__(
        self, client: Client, run_id: str, wait: Callable[[str], Awaitable[RunOutput]]
    ) -> None:
        super().__init__(client, run_id, result_type=RunOutput)
        self._wait = wait

    async def result(
        self,
        *,
        follow_runs: bool = True,
        rpc_metadata: Mapping[str, str | bytes] = {},  # noqa: B006 (Temporal's signature)
        rpc_timeout: timedelta | None = None,
    ) -> RunOutput:
        """Wait for the run's end (``TemporalRuns.result``); the arguments are Temporal's.

        Raises:
            RunCancelledError: The run was cancelled.
            RunNotFoundError: No workflow has this run id.
            EngineUnavailableError: Temporal did not answer.
        """
        return await self._wait(self.id)
