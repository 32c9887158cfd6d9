"""Extensions whose hooks do I/O, on Temporal: their observers and tools run as activities.

A workflow must be deterministic: a hook that searches a memory bank, calls a model or reads a
file cannot run in it. The extensions of a Temporal run are split in two:

- **deterministic** ones (``Planning``, ``SubAgents``, ``DeferredTools``, a ``TaskManager``'s
  ``recovery()``, or any extension
  whose class sets ``temporal_io = False``) run in the workflow, as before;
- **I/O** ones (``Memory``, ``Skills``, and by default any other extension, unless it sets
  ``temporal_io = False``): their observer hooks (``on_claim``, ``on_model_output``,
  ``on_tool_outcome``, ``on_restore``, ``on_complete``) run in the ``steadyrun.extension``
  activity and their tools in the ``steadyrun.tool`` activity.

In the activity the extension is the run's own as far as its state goes: an instance made by
``for_run`` from the worker's template, given the run's saved state (``restore_state``) and a
handle on the run, runs the hook; its state afterwards (``save_state``) and the usage of its
own model calls come back and the workflow's instance takes them. So an extension's run state
must be in ``save_state`` (it must be anyway to survive a crash). The rest of what an I/O
extension adds (``instructions``, the middleware ``wrap_model``, ``review_batch`` and
``wrap_tool``, and ``recover_call``) leaves the workflow too, in the model and tool
activities and a local activity, with the chains in the built-in engine's order:
``steadyrun.temporal._extmw``. The handle in an activity has no sub-agents (a forked skill's
load runs as a child workflow instead: ``_wforks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun._errors import UsageError
    from steadyrun._texts import Texts
    from steadyrun.background._recovery import TaskRecovery
    from steadyrun.chat import Message, ModelResponse, Usage
    from steadyrun.extensions.deferred import DeferredTools
    from steadyrun.extensions.planning import Planning
    from steadyrun.extensions.subagents import SubAgents
    from steadyrun.records import CallRecord, RunSnapshot
    from steadyrun.runtime import Agent, RunResult
    from steadyrun.runtime._extension import Extension, overrides
    from steadyrun.runtime._extset import ExtensionSet
    from steadyrun.stores import MemoryStore, Store
    from steadyrun.tools import Tool

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = [
    "ACTIVITY_EXTENSION",
    "HOOKS",
    "HookInput",
    "HookOutput",
    "does_io",
    "instances_for",
    "io_tool_owners",
    "route_hooks",
    "run_hook",
]

ACTIVITY_EXTENSION = "steadyrun.extension"

HOOKS: dict[str, tuple[Any, ...]] = {
    "on_claim": (str, list[Message]),
    "on_model_output": (str, str, ModelResponse),
    "on_tool_outcome": (str, CallRecord),
    "on_restore": (str,),
    "on_complete": (str, list[Message]),
}
"""The observer hooks an I/O extension runs in the activity, with the types of their arguments."""

# ``TaskRecovery`` reads the workflow's own tasks on Temporal (``WorkflowExecution`` swaps
# its source), so its ``recover_call`` must stay in the workflow.
_DETERMINISTIC = (Planning, SubAgents, DeferredTools, TaskRecovery)


def does_io(ext: Extension) -> bool:
    """Whether ``ext``'s hooks and tools run in activities on Temporal.

    ``temporal_io`` on the extension (or its class) decides; without it, steadyrun's own
    deterministic extensions run in the workflow and every other one in activities.
    """
    declared = getattr(ext, "temporal_io", None)
    if declared is not None:
        return bool(declared)
    return not isinstance(ext, _DETERMINISTIC)


def io_tool_owners(agent: Agent) -> dict[str, str]:
    """The tools of the agent's I/O extensions: tool name -> extension name."""
    return {t.name: ext.name for ext in agent.extensions if does_io(ext) for t in ext.tools()}


@dataclass(kw_only=True)
class HookInput:
    """One observer hook of an I/O extension, run by the ``steadyrun.extension`` activity.

    Attributes:
        agent: The run's agent.
        run_id: The run.
        subagent: Whether the run is a sub-agent's.
        extension: The extension's name.
        hook: ``on_claim``, ``on_model_output``, ``on_tool_outcome``, ``on_restore`` or
            ``on_complete``.
        args: The hook's arguments as plain data.
        state: The extension's state before the hook (``save_state``).
    """

    agent: str
    run_id: str
    subagent: bool = False
    extension: str
    hook: str
    args: list[Any] = field(default_factory=list)
    state: Any = None


@dataclass(kw_only=True)
class HookOutput:
    """The extension after the hook.

    Attributes:
        state: Its state (``save_state``).
        usage: Usage of its own model calls (``Usage`` plain data).
    """

    state: Any = None
    usage: dict[str, Any] = field(default_factory=dict)


# -- in the workflow ------------------------------------------------------------------------


def route_hooks(
    app: AppView, agent: Agent, ext: ExtensionSet, run_id: str, sub: bool
) -> dict[str, list[Usage]]:
    """Make the observer hooks of the run's I/O extensions call the activity.

    The instances' hooks are replaced on the instances themselves (the set finds hooks by
    the class, calls them by the instance); so is ``take_usage``, which adds what the
    activities reported. Returns where each instance's reported usage goes, by name (the
    middleware's activities report there too).
    """
    out: dict[str, list[Usage]] = {}
    for inst in ext.instances:
        if not does_io(inst):
            continue
        reported: list[Usage] = []
        out[inst.name] = reported
        for hook in HOOKS:
            if overrides(inst, hook):
                remote = partial(_remote, app, agent.name, run_id, sub, inst, hook, reported)
                setattr(inst, hook, remote)
        inst.take_usage = partial(_take_usage, inst.take_usage, reported)  # type: ignore[method-assign]
    return out


def _take_usage(own: Callable[[], Usage], reported: list[Usage]) -> Usage:
    total = own()
    for usage in reported:
        total = total + usage
    reported.clear()
    return total


async def _remote(
    app: AppView,
    agent: str,
    run_id: str,
    sub: bool,
    inst: Extension,
    hook: str,
    reported: list[Usage],
    *args: Any,
) -> None:
    options = app.options
    types = HOOKS[hook]
    out: HookOutput = await workflow.execute_activity(
        ACTIVITY_EXTENSION,
        HookInput(
            agent=agent,
            run_id=run_id,
            subagent=sub,
            extension=inst.name,
            hook=hook,
            args=[
                to_plain(list(a) if t is not str else a, t)
                for a, t in zip(args, types, strict=True)
            ],
            state=to_plain(inst.save_state(), Any),
        ),
        result_type=HookOutput,
        # A hook may call a model (memory extraction): a model call's timeout and attempts.
        start_to_close_timeout=options.model_timeout,
        heartbeat_timeout=options.heartbeat_timeout,
        retry_policy=RetryPolicy(
            maximum_attempts=options.model_attempts, initial_interval=options.retry_interval
        ),
        summary=f"{inst.name}.{hook}",
    )
    inst.restore_state(out.state)
    reported.append(from_plain(out.usage, Usage))


# -- in the activity ------------------------------------------------------------------------


class _ActivityHandle:
    """The run as an I/O extension sees it in an activity (``RunHandle`` without sub-agents)."""

    def __init__(self, run_id: str, agent: Agent, subagent: bool, store: Store, texts: Texts):
        self.run_id = run_id
        self.agent = agent
        self.subagent = subagent
        self.store = store
        self.texts = texts

    def subagent_tools(self) -> list[Tool]:
        return [t for t in self.agent.toolset if not t.main_only]

    def _none(self) -> UsageError:
        return UsageError(
            "sub-agents of an extension's hook or tool are not available on Temporal (the hook "
            "runs in an activity); use SubAgents delegations instead"
        )

    async def child_snapshot_calls(self, call_id: str) -> list[CallRecord] | None:
        return None

    async def child_snapshot(self, call_id: str) -> RunSnapshot | None:
        return None

    async def end_child(self, call_id: str, child: RunSnapshot, reason: str) -> list[CallRecord]:
        raise self._none()

    async def run_subagent(self, agent: Any, *, call_id: str, task: str) -> RunResult:
        raise self._none()

    async def record_subcalls(self, parent_id: str, calls: list[CallRecord]) -> list[CallRecord]:
        raise self._none()

    def now(self) -> datetime:
        return datetime.now(UTC)


def instances_for(
    app: AppView, agent: Agent, run_id: str, states: dict[str, Any], subagent: bool = False
) -> dict[str, Extension]:
    """The run's instances of the named extensions, each in the given state, attached."""
    handle = _ActivityHandle(run_id, agent, subagent, app.store or MemoryStore(), app.texts)
    out = {}
    for template in agent.extensions:
        if template.name in states:
            inst = template.for_run()
            inst.restore_state(states[template.name])
            inst.attach(handle)
            out[inst.name] = inst
    return out


async def run_hook(app: AppView, inp: HookInput) -> HookOutput:
    """Run one observer hook on the run's instance; its state and usage afterwards."""
    agent = app.agent(inp.agent)
    found = instances_for(app, agent, inp.run_id, {inp.extension: inp.state}, inp.subagent)
    inst = found.get(inp.extension)
    if inst is None:
        raise UsageError(f"agent {inp.agent!r} has no extension {inp.extension!r} in this worker")
    args = [from_plain(a, t) for a, t in zip(inp.args, HOOKS[inp.hook], strict=True)]
    await getattr(inst, inp.hook)(*args)
    return HookOutput(
        state=to_plain(inst.save_state(), Any), usage=to_plain(inst.take_usage(), Usage)
    )
