"""Instructions and middleware of extensions that do I/O, on Temporal: in activities.

``steadyrun.temporal._extio`` runs the observer hooks and tools of I/O extensions (see
``does_io``) in activities. This module does the same for the rest of what such an extension
adds, so a hook may read a file, query a database or ask a service on either engine:

- ``instructions`` and ``wrap_model`` run in the ``steadyrun.model-wrapped`` activity, around
  the provider call. In the workflow an I/O extension's ``instructions`` gives a marker
  (``marker``) that the activity replaces with the real text, so the text keeps its place
  among the others; its ``wrap_model`` passes the call on, and the activity runs the I/O
  extensions' ``wrap_model`` chain (in the agent's order) around the model.
- ``wrap_tool`` runs in the ``steadyrun.tool`` activity, around the body
  (``ToolCallInput.wraps``). Tools of deterministic extensions, which ran in the workflow,
  then run in the activity too (given their extension's state, as an I/O extension's tools).
- ``review_batch`` and ``recover_call`` run in the ``steadyrun.extension-middleware`` local
  activity and give their result back as data (the reviewed batch's refusals, the recovered
  record).

Each activity makes the run's instances as ``_extio`` does (``for_run``, ``restore_state``
with the run's saved state, ``attach``) and sends back their states (``save_state``), which
the workflow's instances take. Deterministic extensions (``temporal_io = False``) keep
running in the workflow. So the order of a chain stays the built-in engine's, the I/O
extensions implementing ``wrap_model``, ``review_batch`` or ``wrap_tool`` must come after the
deterministic ones implementing it (they are the inner part of the chain); ``check_agent``
refuses an agent where they do not, and one whose I/O ``wrap_tool`` would wrap a tool that can
only run in the workflow (delegations, background and task tools, the context's read tool).

Runs started before this (histories without the ``PATCH_*`` markers) keep running these
hooks in the workflow, so their histories replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain, to_plain
    from steadyrun._errors import UsageError
    from steadyrun.chat import ToolCallPart, Usage
    from steadyrun.records import CallRecord
    from steadyrun.runtime import Agent
    from steadyrun.runtime._extension import (
        BatchNext,
        Extension,
        ModelCall,
        ModelNext,
        ToolBatch,
        ToolCall,
        ToolNext,
        TurnView,
        overrides,
    )
    from steadyrun.runtime._extset import ExtensionSet
    from steadyrun.temporal._extio import does_io, instances_for
    from steadyrun.temporal._payloads import ModelCallInput

if TYPE_CHECKING:
    from steadyrun.temporal._options import AppView

__all__ = [
    "ACTIVITY_MIDDLEWARE",
    "ACTIVITY_MODEL_WRAPPED",
    "PATCH_MODEL",
    "PATCH_RECOVER",
    "PATCH_REVIEW",
    "PATCH_TOOL",
    "MiddlewareInput",
    "MiddlewareOutput",
    "Moved",
    "Routing",
    "WrappedModelInput",
    "WrappedModelOutput",
    "check_agent",
    "fill_instructions",
    "io_chain",
    "marker",
    "model_parts",
    "route_middleware",
    "run_middleware",
    "tool_parts",
    "wrap_model_chain",
    "wrap_tool_chain",
]

ACTIVITY_MODEL_WRAPPED = "steadyrun.model-wrapped"
ACTIVITY_MIDDLEWARE = "steadyrun.extension-middleware"

PATCH_MODEL = "steadyrun.extio-model"
"""Runs whose I/O extensions' ``instructions`` and ``wrap_model`` run in the model activity."""
PATCH_TOOL = "steadyrun.extio-tool"
"""Runs whose I/O extensions' ``wrap_tool`` runs in the tool activity."""
PATCH_REVIEW = "steadyrun.extio-review"
"""Runs whose I/O extensions' ``review_batch`` runs in a local activity."""
PATCH_RECOVER = "steadyrun.extio-recover"
"""Runs whose I/O extensions' ``recover_call`` runs in a local activity."""

_CHAINS = ("wrap_model", "review_batch", "wrap_tool")


def io_chain(agent: Agent, method: str) -> list[str]:
    """The I/O extensions of ``agent`` implementing ``method``, in the chain's order."""
    return [e.name for e in agent.extensions if does_io(e) and overrides(e, method)]


def check_agent(agent: Agent, workflow_tools: set[str]) -> None:
    """Refuse what cannot keep the built-in engine's order, or cannot run in an activity.

    ``workflow_tools``: the agent's tools whose bodies can only run in the workflow.
    """
    for method in _CHAINS:
        first_io: str | None = None
        for ext in agent.extensions:
            if not overrides(ext, method):
                continue
            if does_io(ext):
                first_io = first_io or ext.name
            elif first_io is not None:
                raise UsageError(
                    f"agent {agent.name!r}: the {method} of extension {ext.name!r} (deterministic,"
                    f" run in the workflow) comes after that of {first_io!r}, which does I/O "
                    "(run in an activity) on Temporal: the order cannot be kept. Put the "
                    "extensions that do I/O after the deterministic ones, or declare "
                    "temporal_io = False on an extension that does no I/O"
                )
    wraps = io_chain(agent, "wrap_tool")
    bound = sorted(workflow_tools)
    if wraps and bound:
        raise UsageError(
            f"agent {agent.name!r}: the wrap_tool of {wraps[0]!r} does I/O, so it runs in the "
            f"tool activity on Temporal, but the tools {bound} run in the workflow "
            "(delegations, background and task tools, the context's read tool); declare "
            "temporal_io = False on the extension if its wrap_tool does no I/O"
        )


def marker(name: str) -> str:
    """What an I/O extension's ``instructions`` give in the workflow: replaced in the activity."""
    return f"\x00steadyrun.instructions:{name}\x00"


def fill_instructions(text: str, instances: dict[str, Extension], view: TurnView) -> str:
    """``text`` with each extension's marker replaced by its instructions for ``view``.

    An extension that writes nothing takes its separator with it, as
    ``ExtensionSet.instructions`` leaves it out.
    """
    for name, inst in instances.items():
        mark = marker(name)
        if mark not in text:
            continue
        written = inst.instructions(view)
        if written:
            text = text.replace(mark, written)
        elif "\n\n" + mark in text:
            text = text.replace("\n\n" + mark, "")
        elif mark + "\n\n" in text:
            text = text.replace(mark + "\n\n", "")
        else:
            text = text.replace(mark, "")
    return text


# -- in the workflow ------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class Moved:
    """Which hooks of the agent's I/O extensions run in activities (by the run's patches)."""

    model: bool = False
    tool: bool = False
    review: bool = False
    recover: bool = False

    @classmethod
    def decide(cls, agent: Agent) -> Moved:
        """Asked once per workflow run, before its loop: a marker only where a hook moves."""
        io = [e for e in agent.extensions if does_io(e)]

        def has(*methods: str) -> bool:
            return any(overrides(e, m) for e in io for m in methods)

        return cls(
            model=has("instructions", "wrap_model") and workflow.patched(PATCH_MODEL),
            tool=has("wrap_tool") and workflow.patched(PATCH_TOOL),
            review=has("review_batch") and workflow.patched(PATCH_REVIEW),
            recover=has("recover_call") and workflow.patched(PATCH_RECOVER),
        )


async def _passing(value: Any, next: Any) -> Any:
    return await next(value)


def _replace(inst: Extension, method: str, by: Any) -> None:
    setattr(inst, method, by)  # on the instance: the class's hook stays, found by the set


def _marking(name: str, view: TurnView) -> str:
    return marker(name)


@dataclass(kw_only=True, slots=True)
class Routing:
    """What a remote middleware stage needs: the app, the run, and where usage goes."""

    app: AppView
    agent: str
    run_id: str
    subagent: bool
    reported: dict[str, list[Usage]] = field(default_factory=dict)

    def take(
        self, out: MiddlewareOutput | WrappedModelOutput, instances: dict[str, Extension]
    ) -> None:
        """Restore the instances' states from an activity's output and keep its usage."""
        for name, state in out.states.items():
            if name in instances:
                instances[name].restore_state(state)
        usage = from_plain(out.usage, Usage) if out.usage else Usage()
        for name in out.states:
            if name in self.reported:
                self.reported[name].append(usage)
                break


def route_middleware(moved: Moved, ext: ExtensionSet, routing: Routing) -> None:
    """Make the run's I/O instances' instructions and middleware leave the workflow.

    The instances' methods are replaced on the instances (the set finds hooks by the class and
    calls them by the instance): by a marker, a pass-through, or the remote stage.
    """
    io = [e for e in ext.instances if does_io(e)]
    if moved.model:
        for inst in io:
            if overrides(inst, "instructions"):
                inst.instructions = partial(_marking, inst.name)  # type: ignore[method-assign]
            if overrides(inst, "wrap_model"):
                _replace(inst, "wrap_model", _passing)
    if moved.tool:
        for inst in io:
            if overrides(inst, "wrap_tool"):
                _replace(inst, "wrap_tool", _passing)
    if moved.review:
        chain = [e for e in io if overrides(e, "review_batch")]
        for i, inst in enumerate(chain):
            if i == 0:
                stage = partial(_review, routing, {e.name: e for e in chain})
                inst.review_batch = stage  # type: ignore[method-assign]
            else:
                _replace(inst, "review_batch", _passing)
    if moved.recover:
        for inst in io:
            if overrides(inst, "recover_call"):
                inst.recover_call = partial(_recover, routing, inst)  # type: ignore[method-assign]


def model_parts(ext: ExtensionSet, moved: Moved) -> tuple[list[str], dict[str, Any]]:
    """The I/O ``wrap_model`` chain and the states the model activity needs (``[]``: none)."""
    if not moved.model:
        return [], {}
    io = [e for e in ext.instances if does_io(e)]
    chain = [e.name for e in io if overrides(e, "wrap_model")]
    writers = [e for e in io if overrides(e, "instructions")]
    states = {e.name: to_plain(e.save_state(), Any) for e in io if e.name in chain or e in writers}
    return chain, states


def tool_parts(ext: ExtensionSet | None, moved: Moved) -> list[str]:
    """The I/O ``wrap_tool`` chain the tool activity runs around the body."""
    if ext is None or not moved.tool:
        return []
    return [e.name for e in ext.instances if does_io(e) and overrides(e, "wrap_tool")]


async def _middleware(
    routing: Routing, hook: str, instances: dict[str, Extension], value: Any
) -> MiddlewareOutput:
    options = routing.app.options
    out: MiddlewareOutput = await workflow.execute_local_activity(
        ACTIVITY_MIDDLEWARE,
        MiddlewareInput(
            agent=routing.agent,
            run_id=routing.run_id,
            subagent=routing.subagent,
            hook=hook,
            chain=list(instances),
            states={n: to_plain(e.save_state(), Any) for n, e in instances.items()},
            value=value,
        ),
        result_type=MiddlewareOutput,
        # A hook may ask a service or a model: a model call's timeout and attempts.
        start_to_close_timeout=options.model_timeout,
        retry_policy=RetryPolicy(
            maximum_attempts=options.model_attempts,
            initial_interval=options.retry_interval,
            non_retryable_error_types=["UsageError"],
        ),
        summary=f"{next(iter(instances))}.{hook}",
    )
    routing.take(out, instances)
    return out


async def _review(
    routing: Routing, chain: dict[str, Extension], batch: ToolBatch, next: BatchNext
) -> ToolBatch:
    out = await _middleware(routing, "review_batch", chain, _batch_plain(batch))
    reviewed = replace(batch, denied={int(i): str(why) for i, why in out.value})
    return await next(reviewed)


async def _recover(routing: Routing, inst: Extension, record: CallRecord) -> CallRecord | None:
    out = await _middleware(
        routing, "recover_call", {inst.name: inst}, to_plain(record, CallRecord)
    )
    return None if out.value is None else from_plain(out.value, CallRecord)


def _batch_plain(batch: ToolBatch) -> dict[str, Any]:
    return {
        "run_id": batch.run_id,
        "model_call_id": batch.model_call_id,
        "calls": to_plain(list(batch.calls), list[ToolCallPart]),
        "denied": [[i, why] for i, why in sorted(batch.denied.items())],
    }


def _batch_from(plain: dict[str, Any]) -> ToolBatch:
    return ToolBatch(
        run_id=plain["run_id"],
        model_call_id=plain["model_call_id"],
        calls=tuple(from_plain(plain["calls"], list[ToolCallPart])),
        denied={int(i): str(why) for i, why in plain["denied"]},
    )


# -- in the activity ------------------------------------------------------------------------


@dataclass(kw_only=True)
class WrappedModelInput:
    """A model call inside I/O extensions' ``instructions`` and ``wrap_model``.

    Attributes:
        call: The model call (its request's instructions hold the extensions' markers).
        subagent: Whether the run is a sub-agent's.
        chain: The I/O extensions whose ``wrap_model`` wraps the call, outermost first.
        states: The states (``save_state``) of those and of the extensions writing
            instructions, by name.
        view: The ``TurnView`` of the call, as plain data.
    """

    call: ModelCallInput
    subagent: bool = False
    chain: list[str] = field(default_factory=list)
    states: dict[str, Any] = field(default_factory=dict)
    view: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class WrappedModelOutput:
    """The response, and the extensions after it.

    Attributes:
        response: The ``ModelResponse`` as plain data.
        states: The extensions' states by name.
        usage: Usage of their own model calls (``Usage`` plain data).
    """

    response: dict[str, Any] = field(default_factory=dict)
    states: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class MiddlewareInput:
    """``review_batch`` (a chain) or ``recover_call`` (one extension) of I/O extensions.

    Attributes:
        agent: The run's agent.
        run_id: The run.
        subagent: Whether the run is a sub-agent's.
        hook: ``review_batch`` or ``recover_call``.
        chain: The extensions, in the chain's order.
        states: Their states (``save_state``) by name.
        value: The batch (``review_batch``: run id, model call id, calls, refusals as
            ``[index, reason]`` pairs) or the record (``recover_call``), as plain data.
    """

    agent: str
    run_id: str
    subagent: bool = False
    hook: str
    chain: list[str] = field(default_factory=list)
    states: dict[str, Any] = field(default_factory=dict)
    value: Any = None


@dataclass(kw_only=True)
class MiddlewareOutput:
    """The extensions after the hook, and its result.

    Attributes:
        states: Their states by name.
        usage: Usage of their own model calls (``Usage`` plain data).
        value: The refusals (``[index, reason]`` pairs) or the recovered record (``None``:
            left to the runtime's rule).
    """

    states: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    value: Any = None


async def run_middleware(app: AppView, inp: MiddlewareInput) -> MiddlewareOutput:
    """Run ``review_batch`` or ``recover_call`` on the run's instances; their result as data."""
    agent = app.agent(inp.agent)
    found = instances_for(app, agent, inp.run_id, inp.states, inp.subagent)
    missing = [n for n in inp.chain if n not in found]
    if missing:
        raise UsageError(f"agent {inp.agent!r} has no extension {missing[0]!r} in this worker")
    chain = ExtensionSet([found[n] for n in inp.chain])
    value: Any
    if inp.hook == "review_batch":
        reviewed = await chain.review_batch(_batch_from(inp.value))
        value = [[i, why] for i, why in sorted(reviewed.denied.items())]
    elif inp.hook == "recover_call":
        record = await chain.recover(from_plain(inp.value, CallRecord))
        value = None if record is None else to_plain(record, CallRecord)
    else:
        raise UsageError(f"no middleware hook {inp.hook!r}")
    return MiddlewareOutput(
        states={n: to_plain(e.save_state(), Any) for n, e in found.items()},
        usage=to_plain(chain.take_usage(), Usage),
        value=value,
    )


async def wrap_tool_chain(
    instances: Mapping[str, Any], chain: list[str], call: ToolCall, body: ToolNext
) -> Any:
    """The tool body inside the I/O extensions' ``wrap_tool`` chain (in the activity)."""
    return await ExtensionSet([instances[n] for n in chain]).run_tool(call, body)


async def wrap_model_chain(
    instances: dict[str, Extension], chain: list[str], call: ModelCall, model: ModelNext
) -> Any:
    """The model call inside the I/O extensions' ``wrap_model`` chain (in the activity)."""
    return await ExtensionSet([instances[n] for n in chain]).call_model(call, model)
