"""How runs use Temporal (``TemporalOptions``); what the workflow reads of its app (``AppView``).

The app imports the workflow and the activities; they know it only through ``AppView``, so
none of them imports the app back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from temporalio.converter import PayloadCodec

from steadyrun._texts import Texts
from steadyrun.background import BackgroundTool
from steadyrun.media import MediaOptions
from steadyrun.runtime import Agent
from steadyrun.runtime._calls import HandoverHook
from steadyrun.stores import Store

__all__ = ["AppView", "TemporalOptions"]


@dataclass(kw_only=True, frozen=True)
class TemporalOptions:
    """How runs use Temporal; every worker of a task queue must use the same options.

    Attributes:
        task_queue: The task queue workers poll and runs start on.
        model_timeout: Start-to-close timeout of one model call.
        model_attempts: Attempts of a model call (a failure after the last fails the run,
            as in the built-in engine: resume by starting the run again).
        tool_timeout: Start-to-close timeout of a tool body without its own ``timeout``.
        tool_attempts: Attempts of a tool body whose worker was lost, for tools that are
            replayable or have no side effects. Tools with side effects that are not
            replayable get exactly one attempt: a lost attempt is settled ``needs_review``.
        heartbeat_timeout: How soon the loss of a worker running an activity (a model call, a
            tool body, a background operation, a write to the store) is noticed: its
            attempt then fails and the next one runs on another worker. Activities
            heartbeat every third of it. With the default (4 s) and the worker's default
            sticky-queue timeout (``TemporalApp.worker``: 2 s), a run whose worker is
            SIGKILLed goes on in another worker within about 10 s.
        retry_interval: First interval between attempts.
        record_timeout: Start-to-close timeout of one write batch to the store.
        continue_as_new_after: History length past which the workflow continues as new at its
            next saved step, carrying the context log (``None``: only when Temporal suggests).
        payload_codec: Encodes every payload the app's clients and workers send to Temporal;
            ``LargePayloadCodec`` keeps large ones (tool results, contexts) out of the history.
            Clients must use the same codec (``TemporalApp.client``, ``TemporalApp.runs``).
    """

    task_queue: str = "steadyrun"
    model_timeout: timedelta = timedelta(minutes=10)
    model_attempts: int = 3
    tool_timeout: timedelta = timedelta(hours=1)
    tool_attempts: int = 3
    heartbeat_timeout: timedelta = timedelta(seconds=4)
    retry_interval: timedelta = timedelta(seconds=1)
    record_timeout: timedelta = timedelta(minutes=1)
    continue_as_new_after: int | None = 10_000
    payload_codec: PayloadCodec | None = None


class AppView(Protocol):
    """What the workflow, its calls and the activities read of a ``TemporalApp``."""

    @property
    def options(self) -> TemporalOptions:
        """Timeouts, retries and continue-as-new."""
        ...

    @property
    def texts(self) -> Texts:
        """The sentences the runtime writes to the model."""
        ...

    @property
    def store(self) -> Store | None:
        """Where runs are recorded (``None``: nowhere)."""
        ...

    @property
    def media(self) -> MediaOptions | None:
        """How the model activity reads media."""
        ...

    @property
    def on_handover(self) -> HandoverHook | None:
        """The host's hook before a submission or pending confirmation is saved."""
        ...

    @property
    def background(self) -> Mapping[str, BackgroundTool]:
        """The background tools whose calls run as activities, by name."""
        ...

    def agent(self, name: str) -> Agent:
        """The agent named ``name``."""
        ...
