"""``TemporalApp``: the agents a Temporal worker runs, the store it records to, its options."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import Replayer, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from steadyrun._errors import UsageError
from steadyrun.background import BackgroundTool, Materializer
from steadyrun.context._read_tool import READ_TOOL
from steadyrun.media import MediaOptions
from steadyrun.runtime import Agent, Texts
from steadyrun.runtime._calls import HandoverHook
from steadyrun.stores import Store
from steadyrun.temporal._activities import Activities
from steadyrun.temporal._ahead import AheadAwareRunner
from steadyrun.temporal._client import TemporalRuns, client_with_codec
from steadyrun.temporal._contextfree import ContextFreeRunner, context_free
from steadyrun.temporal._converter import with_step_converter
from steadyrun.temporal._extmw import check_agent
from steadyrun.temporal._options import TemporalOptions
from steadyrun.temporal._subagents import child_agents, delegations
from steadyrun.temporal._wforks import fork_agents
from steadyrun.temporal._workflow import AgentWorkflow, register_app
from steadyrun.temporal._wshared import shared_view
from steadyrun.temporal._wtasks import TASK_TOOLS

__all__ = ["STICKY_TIMEOUT", "TemporalApp", "TemporalOptions"]

STICKY_TIMEOUT = timedelta(seconds=2)
"""The workers' default sticky-queue schedule-to-start timeout (a lost worker's share)."""


class TemporalApp:
    """The agents a worker can run, by name, and where their runs are recorded.

    Args:
        agents: The agents; a run names its agent, the worker finds it here.
        store: Where runs are recorded as they advance (``SqliteStore``, ``PostgresStore``), so
            ``Runtime``, the CLI and the web page show them; ``None`` records nothing.
        options: Timeouts, retries and continue-as-new.
        texts: The sentences the runtime writes to the model.
        media: How the model activity reads media.
        background: ``BackgroundTool`` instances whose calls (of the tools
            ``TaskManager.tool`` made of them) run as heartbeating ``steadyrun.background``
            activities the run's workflow owns: adopted into the background with a launch
            receipt past the tool's foreground timeout, announced in the run's feed when
            they end, answered by the agent's task tools, recovered from their last
            checkpoint after a worker loss (docs/temporal.md).
        on_handover: Called with (run id, record) before a submission or a pending
            confirmation is saved, as ``Runtime(on_handover=...)``; raise ``CallRejected`` to
            refuse the call. It runs in the ``steadyrun.handover`` activity, so it may do I/O.
        task_output_dir: When set, the worker running a background operation writes its
            progress updates to ``<dir>/<task>.jsonl`` as ``TaskManager(output_dir=...)``
            does (each event id once): a folder of that worker's machine, or one every
            worker shares.

    Raises:
        UsageError: Two agents share a name; or an agent's extensions that do I/O cannot
            keep their place on Temporal (``steadyrun.temporal._extmw``): one's
            ``wrap_model``, ``review_batch`` or ``wrap_tool`` comes before a deterministic
            extension's (it runs in an activity, inside the workflow's part of the chain),
            or one's ``wrap_tool`` would wrap a tool that runs only in the workflow.

    Example:
        ``worker = TemporalApp(agents=[agent], store=SqliteStore("runs.db")).worker(client)``
    """

    def __init__(
        self,
        *,
        agents: Iterable[Agent],
        store: Store | None = None,
        options: TemporalOptions | None = None,
        texts: Texts | None = None,
        media: MediaOptions | None = None,
        background: Iterable[BackgroundTool] = (),
        on_handover: HandoverHook | None = None,
        task_output_dir: Path | str | None = None,
    ) -> None:
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            if agent.name in self._agents and self._agents[agent.name] is not agent:
                raise UsageError(f"two different agents are named {agent.name!r}")
            self._agents[agent.name] = agent
        self.texts = texts or Texts()
        for agent in list(self._agents.values()):
            # The children of its SubAgents delegations, which run as child workflows.
            # And the agents of its forked skills, which run as child workflows too.
            # Each runs with its parent's extensions (``_wshared``).
            for child in [*child_agents(agent, self.texts), *fork_agents(agent, self.texts)]:
                self._agents.setdefault(child.name, shared_view(child, agent))
        self.store = store
        self.options = options or TemporalOptions()
        self.media = media
        self.background: dict[str, BackgroundTool] = {t.name: t for t in background}
        for agent in self._agents.values():
            check_agent(agent, _workflow_tools(agent, set(self.background)))
        self.on_handover = on_handover
        output = Materializer(Path(task_output_dir)) if task_output_dir is not None else None
        self.activities = Activities(self, task_output=output)

    def agent(self, name: str) -> Agent:
        """The agent named ``name``.

        Raises:
            KeyError: No such agent in this app.
        """
        try:
            return self._agents[name]
        except KeyError:
            raise KeyError(f"this worker's TemporalApp has no agent named {name!r}") from None

    @property
    def agents(self) -> list[Agent]:
        """The app's agents."""
        return list(self._agents.values())

    @property
    def data_converter(self) -> DataConverter:
        """Temporal's default converter with the app's ``payload_codec``.

        Its payload converter is ``StepPayloadConverter``: the same bytes as Temporal's,
        without deep-copying every dataclass argument first (``steadyrun.temporal._converter``).
        """
        converter = with_step_converter(DataConverter.default)
        codec = self.options.payload_codec
        if codec is None:
            return converter
        return dataclasses.replace(converter, payload_codec=codec)

    def client(self, client: Client) -> Client:
        """``client`` with the app's payload codec (the same connection)."""
        return client_with_codec(client, self.options.payload_codec)

    def _worker_client(self, client: Client) -> Client:
        """``client(client)`` whose default payload converter is ``StepPayloadConverter``."""
        client = self.client(client)
        config = client.config()
        converter = config.get("data_converter") or DataConverter.default
        faster = with_step_converter(converter)
        if faster is converter:
            return client
        config["data_converter"] = faster
        return Client(**config)

    def runs(self, client: Client) -> TemporalRuns:
        """A ``TemporalRuns`` on the app's task queue, with its payload codec and store."""
        return TemporalRuns(
            client,
            task_queue=self.options.task_queue,
            payload_codec=self.options.payload_codec,
            store=self.store,
        )

    def worker(self, client: Client, *, task_queue: str | None = None, **kwargs: Any) -> Worker:
        """A Temporal worker running this app's workflows and activities.

        Args:
            client: A connected Temporal client (given the app's data converter here: when
                its payload converter is Temporal's default, ``StepPayloadConverter``, which
                writes the same bytes faster).
            task_queue: Overrides ``options.task_queue``.
            **kwargs: Passed to ``temporalio.worker.Worker``. Unless given,
                ``sticky_queue_schedule_to_start_timeout`` is 2 s (Temporal's default is
                10 s): how long a workflow task waits for the worker that ran the workflow
                last before any worker takes it; after a SIGKILL it is part of the time a
                run waits.
        """
        queue = task_queue or self.options.task_queue
        kwargs.setdefault("sticky_queue_schedule_to_start_timeout", STICKY_TIMEOUT)
        register_app(queue, self)
        client = self._worker_client(client)
        return Worker(
            client,
            task_queue=queue,
            workflows=[AgentWorkflow],
            activities=self.activities.all(),
            workflow_runner=workflow_runner(client.data_converter),
            **kwargs,
        )

    def replayer(self, **kwargs: Any) -> Replayer:
        """A replayer of recorded ``AgentWorkflow`` histories against this app's agents."""
        register_app(None, self)
        kwargs.setdefault("data_converter", self.data_converter)
        runner = workflow_runner(kwargs["data_converter"])
        return Replayer(workflows=[AgentWorkflow], workflow_runner=runner, **kwargs)


def _workflow_tools(agent: Agent, background: set[str]) -> set[str]:
    """The agent's tools whose bodies can only run in its workflow (``_extmw.check_agent``)."""
    names = set(agent.toolset.names)
    bound = set(delegations(agent)) | (names & background) | (names & TASK_TOOLS)
    if agent.context is not None:
        bound.add(READ_TOOL)
    return bound


def workflow_runner(converter: DataConverter | None = None) -> WorkflowRunner:
    """Temporal's sandbox, with steadyrun passed through, refusing updates while ahead.

    Its instances refuse updates while a query has run a workflow ahead of its history (see
    ``steadyrun.temporal._ahead``). steadyrun's loop is deterministic given its clock (the
    workflow's) and its store (in the workflow's memory); agents, tools and policies come from
    the worker's own imports.

    With ``converter`` that no serialization context changes, its instances skip the sandbox
    round trip Temporal makes to ask for one for every payload (``ContextFreeRunner``).
    """
    restrictions = SandboxRestrictions.default.with_passthrough_modules("steadyrun")
    runner = AheadAwareRunner(SandboxedWorkflowRunner(restrictions=restrictions))
    if converter is not None and context_free(converter):
        return ContextFreeRunner(runner)
    return runner
