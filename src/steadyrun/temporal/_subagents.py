"""Sub-agents on Temporal: a delegation of the ``SubAgents`` extension as a child workflow.

On the built-in engine a delegation tool drives the child run inside its own body
(``RunHandle.run_subagent``). In a workflow that would call models from workflow code, so the
workflow's ``CallRunner`` recognises the delegation tools of the agent's ``SubAgents``
instance and runs them here instead: the child is an ``AgentWorkflow`` (workflow id
``<run>/<call>``, the built-in engine's child run id) of the child agent, which the app
registers by name (``<agent>.subagent``, ``<agent>.<delegate>``) with the same construction
the extension uses. The child records itself in the store under its own id; when it ends its
call records are copied under the delegation call (``parent_id``), its usage is counted, and a
child that did not complete fails the call with the extension's sentence. Cancelling the
parent cancels the child (``ParentClosePolicy.REQUEST_CANCEL`` and the cancelled await).
A parent resumed after its workflow was terminated mid-delegation takes over the child the
terminated run abandoned (``_take_over``), or continues it from the store if it ended.

A delegation is never in flight when the parent continues as new: ``WorkflowStore`` continues
only from ``save_step``, and the loop saves steps only outside ``BatchRunner.run`` (before the
batch's calls start, after all of them ended). That is the design, not luck: a continued run
cannot await a child the previous run started (Temporal delivers a child's result only to the
run that started it), so the parent closing mid-delegation would cancel the child
(``REQUEST_CANCEL``) and queue the call again. A save_step inside a batch would break this.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol, cast

from temporalio import workflow
from temporalio.exceptions import CancelledError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import from_plain
    from steadyrun._texts import Texts
    from steadyrun.chat import Usage
    from steadyrun.control import HostFailure
    from steadyrun.extensions.subagents import (
        Delegate,
        SubAgentFailed,
        SubAgents,
        _child_agent,
    )
    from steadyrun.records import CallRecord
    from steadyrun.runtime import Agent, Limits
    from steadyrun.runtime._extension import RunHandle, ToolCall
    from steadyrun.runtime._handle import child_run_id
    from steadyrun.temporal._payloads import (
        ACTIVITY_CHILD_END,
        WORKFLOW_NAME,
        ChildEnd,
        RunInput,
        RunOutput,
    )
    from steadyrun.temporal._wshared import parent_states, take_states
    from steadyrun.tools import Tool

__all__ = [
    "PATCH_SUBAGENT_BACKGROUND",
    "PATCH_SUBAGENT_TAKEOVER",
    "ChildResults",
    "Delegation",
    "MainOnly",
    "child_agents",
    "delegations",
    "record_subcalls",
    "run_delegation",
    "why_of",
]

PATCH_SUBAGENT_BACKGROUND = "steadyrun.subagent-background"
"""Marks parents whose delegations take a child's result by signal (``_wchildren``)."""

PATCH_SUBAGENT_TAKEOVER = "steadyrun.subagent-takeover"
"""Marks parents whose delegations take over a child still going (``_take_over``)."""

_FOREVER = timedelta(days=365)  # a child may wait that long; a lost worker shows by heartbeat


@dataclass(frozen=True, slots=True)
class Delegation:
    """A delegation tool of an agent and the child agent it runs.

    Attributes:
        tool: The delegation tool's name (``delegate``, ``delegate_<name>``).
        child: The child agent's name in the app (``<agent>.subagent``, ``<agent>.<name>``).
        typed: Whether the child returns a typed completion (a ``Delegate`` with ``output``).
        limits: The child's limits (``max_iterations`` shown when it hits them).
        failure: The ``Texts`` field of the error of a child that did not complete
            (``skill_failed`` for a forked skill).
    """

    tool: str
    child: str
    typed: bool
    limits: Limits
    failure: str = "subagent_failed"


class ChildResults(Protocol):
    """What a delegation reads and writes of the workflow's ``ChildTurns`` (``_wchildren``)."""

    early: dict[str, RunOutput]  # child run id -> its first turn's result, signalled
    going: dict[str, str]  # child run id -> its delegation tool, once that result was taken


def _specs(agent: Agent) -> Iterator[tuple[SubAgents, Delegate | None]]:
    for ext in agent.extensions:
        if isinstance(ext, SubAgents):
            if ext.general:
                yield ext, None
            for spec in ext.delegates.values():
                yield ext, spec


def delegations(agent: Agent) -> dict[str, Delegation]:
    """The delegation tools of ``agent``'s ``SubAgents`` extension, by tool name."""
    out = {}
    for ext, spec in _specs(agent):
        if spec is None:
            out["delegate"] = Delegation(
                tool="delegate", child=f"{agent.name}.subagent", typed=False, limits=ext.limits
            )
        else:
            out[f"delegate_{spec.name}"] = Delegation(
                tool=f"delegate_{spec.name}",
                child=f"{agent.name}.{spec.name}",
                typed=spec.output is not None,
                limits=spec.limits,
            )
    return out


class MainOnly:
    """What ``_child_agent`` reads from a run handle: the main agent and its shareable tools."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def subagent_tools(self) -> list[Tool]:
        return [t for t in self.agent.toolset if not t.main_only]


def child_agents(agent: Agent, texts: Texts) -> list[Agent]:
    """The child agents of ``agent``'s delegations, built as the ``SubAgents`` extension does."""
    handle = cast(RunHandle, MainOnly(agent))
    return [_child_agent(spec, handle, ext.limits, texts) for ext, spec in _specs(agent)]


async def run_delegation(
    delegation: Delegation,
    call: ToolCall,
    save: Callable[[CallRecord], Any],
    children: ChildResults | None = None,
    heartbeat: timedelta = timedelta(seconds=4),
) -> Any:
    """Run a delegation call as a child workflow and return what the tool would return.

    Args:
        delegation: The delegation the call's tool is.
        call: The call (its arguments hold the ``task``).
        save: The workflow's ``CallRunner.save`` (the child's calls are copied with it).
        children: The workflow's ``ChildTurns``: the child may then signal its result while
            its background tasks go on (runs with ``PATCH_SUBAGENT_BACKGROUND``).
        heartbeat: The heartbeat timeout of the wait for a child taken over.

    Raises:
        SubAgentFailed: The child did not complete.
        HostFailure: The child workflow itself failed or was terminated (the call is then
            settled by its traits: ``needs_review``, as a delegation has side effects).
    """
    ctx = call.context
    run_id = child_run_id(ctx.run_id, call.record.id)
    task = str(call.args.get("task", ""))
    shared = parent_states(ctx)  # the child runs with the parent's extensions, as they are
    if children is not None and workflow.patched(PATCH_SUBAGENT_BACKGROUND):
        out = await _detachable(delegation, call, run_id, task, children, shared, heartbeat)
    else:
        out = await _child(delegation, call, run_id, task, shared)
    take_states(ctx, out.shared)
    await record_subcalls(call.record.id, out.calls, save)
    if out.usage:
        ctx.report_usage(from_plain(out.usage, Usage))
    if out.status != "completed":
        why = why_of(out, ctx.texts, delegation)
        failure: str = getattr(ctx.texts, delegation.failure)
        raise SubAgentFailed(failure.format(why=why))
    if delegation.typed:
        return out.completion
    return out.text or ""


def _child_input(
    delegation: Delegation,
    run_id: str,
    task: str,
    parent: str | None = None,
    shared: dict[str, Any] | None = None,
    *,
    stored: bool = False,
) -> RunInput:
    """The child workflow's input: the delegation's task as its first message.

    ``stored``: a child run the app's store has goes on from there (not anew, and without
    the task again), as the built-in engine's ``run_subagent`` continues it.
    """
    return RunInput(
        agent=delegation.child,
        run_id=run_id,
        input=task,
        input_id=f"{run_id}:task",
        subagent=True,
        parent=parent,
        shared=shared,
        resume=stored,
    )


async def _child(
    delegation: Delegation,
    call: ToolCall,
    run_id: str,
    task: str,
    shared: dict[str, Any] | None = None,
) -> RunOutput:
    """The child workflow's output (delegations from before ``PATCH_SUBAGENT_BACKGROUND``)."""
    try:
        out: RunOutput = await workflow.execute_child_workflow(
            WORKFLOW_NAME,
            _child_input(delegation, run_id, task, shared=shared),
            id=run_id,
            task_queue=workflow.info().task_queue,
            result_type=RunOutput,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"{delegation.child} for {call.record.id}",
        )
    except ChildWorkflowError as exc:
        raise _failed(exc) from None
    return out


async def _detachable(
    delegation: Delegation,
    call: ToolCall,
    run_id: str,
    task: str,
    children: ChildResults,
    shared: dict[str, Any] | None = None,
    heartbeat: timedelta = timedelta(seconds=4),
) -> RunOutput:
    """The child's first turn: its workflow's output, or signalled while its tasks go on.

    The child is abandoned when this run closes (a continue-as-new must not cancel a child
    whose tasks go on); a cancel of this run cancels it here, or through ``ChildTurns``.
    Since ``PATCH_SUBAGENT_TAKEOVER`` a child that a terminated run of this workflow
    abandoned is taken over (``_take_over``), and one that ended goes on from the store.
    """
    takeover = workflow.patched(PATCH_SUBAGENT_TAKEOVER)
    parent = workflow.info().workflow_id
    try:
        handle = await workflow.start_child_workflow(
            WORKFLOW_NAME,
            _child_input(delegation, run_id, task, parent, shared, stored=takeover),
            id=run_id,
            task_queue=workflow.info().task_queue,
            result_type=RunOutput,
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=f"{delegation.child} for {call.record.id}",
        )
    except WorkflowAlreadyStartedError:
        if not takeover:
            raise
        return await _take_over(delegation, run_id, children, heartbeat)
    try:
        await workflow.wait_condition(lambda: handle.done() or run_id in children.early)
    except asyncio.CancelledError:
        handle.cancel()  # the run is cancelled: so is its child, as with REQUEST_CANCEL
        with contextlib.suppress(BaseException):
            await handle
        raise
    if run_id in children.early:
        # Its turn ended with tasks going: it stays open, and its later turns are signalled.
        handle.add_done_callback(_quiet)
        return _going(delegation, run_id, children)
    try:
        out: RunOutput = await handle
    except ChildWorkflowError as exc:
        raise _failed(exc) from None
    return out


def _going(delegation: Delegation, run_id: str, children: ChildResults) -> RunOutput:
    """The child's signalled first turn; it goes on with its tasks, telling later turns."""
    children.going[run_id] = delegation.tool
    return children.early.pop(run_id)


async def _take_over(
    delegation: Delegation, run_id: str, children: ChildResults, heartbeat: timedelta
) -> RunOutput:
    """The first turn of a child still going that an earlier run of this workflow started.

    A run terminated while a delegation waited abandoned its child (``ABANDON``); resumed,
    it runs the delegation again and the child's id is taken. The child signals its parent
    by workflow id, so a turn that ends with tasks going reaches this run; its workflow's
    result, though, goes only to the run that started it, and the ``steadyrun.subagent-end``
    activity waits for it instead. Nothing of the child runs again: it is the same child.
    """
    end = workflow.start_activity(
        ACTIVITY_CHILD_END,
        run_id,
        result_type=ChildEnd,
        activity_id=f"subagent-end:{run_id}",
        start_to_close_timeout=_FOREVER,
        heartbeat_timeout=heartbeat,
    )
    end.add_done_callback(_quiet)
    try:
        await workflow.wait_condition(lambda: end.done() or run_id in children.early)
    except asyncio.CancelledError:
        end.cancel()
        # The run is cancelled: so is the child it took over, as its own would be.
        with contextlib.suppress(Exception):
            await workflow.get_external_workflow_handle(run_id).cancel()
        raise
    if run_id in children.early:
        end.cancel()  # its later turns come by signal
        return _going(delegation, run_id, children)
    ended: ChildEnd = end.result()
    if ended.cancelled:
        raise asyncio.CancelledError()  # as ``_failed`` for a child cancelled on its own
    if ended.output is None:
        raise HostFailure(f"its child workflow ended ({ended.error})")
    return ended.output


def _quiet(handle: Any) -> None:
    """Retrieve how an abandoned child's handle ended (its later turns came by signal)."""
    if not handle.cancelled():
        handle.exception()


def _failed(exc: ChildWorkflowError) -> BaseException:
    """What a delegation raises for a child workflow that ended otherwise than with a result."""
    cause = exc.cause if exc.cause is not None else exc
    if isinstance(cause, CancelledError):
        # The child was cancelled: with this workflow (re-raised as the run's own
        # cancellation by the CallRunner) or on its own (the call settles cancelled).
        return asyncio.CancelledError()
    return HostFailure(f"its child workflow ended ({type(cause).__name__}: {cause})")


async def record_subcalls(
    parent_id: str, calls: Sequence[dict[str, Any]], save: Callable[[CallRecord], Any]
) -> None:
    """Copy a child's call records under the delegation call, as ``RunHandle`` does."""
    for plain in calls:
        record = from_plain(plain, CallRecord)
        await save(replace(record, id=f"{parent_id}/{record.id}", parent_id=parent_id))


def why_of(out: RunOutput, texts: Texts, delegation: Delegation | None) -> str:
    """``why_unfinished`` of the extension, from the child's output (error class names)."""
    kind = out.error_kind
    if kind is None:
        return texts.subagent_would_wait
    if kind == "IterationLimitExceeded":
        limits = delegation.limits if delegation is not None else Limits()
        limit = f"max_iterations={limits.max_iterations}"
        return texts.subagent_hit_limit.format(limit=limit)
    if kind in ("InvalidModelOutput", "CorrectionsExhausted"):
        return texts.subagent_bad_output
    if kind == "ContentFiltered":
        return texts.subagent_filtered
    if kind == "ModelCallFailed":
        return texts.subagent_model_failed.format(error=out.error or "")
    return f"{kind}: {out.error}"
