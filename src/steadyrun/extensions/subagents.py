"""Sub-agents: the main agent hands tasks to child agents through delegation tools.

Each delegation drives a durable child run (id ``<run>/<call>``) on the same store. The child
cannot suspend, uses the main agent's tools except ``main_only`` ones (delegation and planning
among them) or, for a typed delegate, its own; its call records are copied under the delegation
call (``parent_id``) and its usage is counted in the run's. After a crash the delegation resumes
the child from its own checkpoint, unless the child left a side effect whose outcome is unknown:
then the delegation is ``needs_review`` and nothing repeats it: the child run is ended (``failed``,
``SubAgentInterrupted``) with that call ``needs_review``, and its records are copied under the
delegation call as for a finished delegation.

A sub-agent may leave background tasks going when its delegation returns (a ``BackgroundTool``
call adopted into a task: its model got the launch receipt). When such a task ends, its
notification goes to the child run's feed, which wakes the run tree; the main run, resumed,
gives the child a new turn (``on_restore``) and tells its own model what the child answered,
in a system message of its feed (``Texts.subagent_follow_up``), taken in a new turn or at the
next safe point. That turn's usage is counted in the main run's too (``take_usage``), and it
changed the main run's extension instances, which the child shares.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from steadyrun._errors import (
    ContentFiltered,
    CorrectionsExhausted,
    InvalidModelOutput,
    IterationLimitExceeded,
    ModelCallFailed,
    SteadyrunError,
    SubAgentInterrupted,
    UsageError,
)
from steadyrun._texts import Texts, default_texts, texts_of
from steadyrun.chat import ModelResponse, ToolDefinition, Usage
from steadyrun.models import ModelClient
from steadyrun.records import CallRecord
from steadyrun.runtime._agent import Agent, Limits
from steadyrun.runtime._completion import Correct, GuardView, Verdict
from steadyrun.runtime._extension import Extension, ModelCall, ModelNext, RunHandle
from steadyrun.runtime._handle import child_run_id
from steadyrun.runtime._recovery import needs_recovery, outcome_unknown
from steadyrun.runtime._result import RunResult
from steadyrun.stores import FeedMessage
from steadyrun.tools import Tool, ToolContext, tool, validate_tool_name

__all__ = [
    "Delegate",
    "SubAgentFailed",
    "SubAgents",
    "recover_child_call",
    "resume_child_or_review",
]

GENERAL_INSTRUCTIONS = (
    "You are a sub-agent working on one task for another agent. Use your tools as needed, then "
    "answer with the result; your answer is all the other agent will see."
)
"""The English instructions of the general sub-agent (``Texts().subagent_instructions``)."""


@dataclass(kw_only=True, frozen=True)
class Delegate:
    """A named child agent with its own instructions, tools, model, limits and output type.

    Attributes:
        name: Names the delegation tool (``delegate_<name>``) and the child agent.
        description: When to use it, as the main agent's model reads it.
        instructions: The child's instructions; ``None``: the runtime's
            ``Texts.subagent_instructions``.
        tools: The child's own tools; ``None``: the main agent's tools (not ``main_only`` ones).
        model: The child's model; ``None``: the main agent's.
        output: A type (pydantic model, dataclass, ``TypedDict``...) the child's result must
            have: the child ends by calling ``submit_result`` with it, validated before the
            main agent sees it. ``None``: the child's final text.
        limits: The child's limits; ``max_iterations`` is its budget of model calls.
    """

    name: str
    description: str
    instructions: str | None = None
    tools: Sequence[Tool | Callable[..., Any]] | None = None
    model: ModelClient | str | None = None
    output: Any = None
    limits: Limits = field(default_factory=lambda: Limits(max_iterations=10, corrections=2))

    def __post_init__(self) -> None:
        problems = validate_tool_name(f"delegate_{self.name}")
        if problems:
            raise UsageError(f"Delegate name {self.name!r}: " + "; ".join(problems))
        if not self.description.strip():
            raise UsageError(f"Delegate {self.name!r} needs a description for the model")


class SubAgentFailed(SteadyrunError):
    """A sub-agent's run failed; the delegation call fails with this message."""


class SubAgents(Extension):
    """Delegation tools: ``delegate`` (a general sub-agent) and one per typed ``Delegate``.

    Args:
        delegates: Typed delegates, each offered as ``delegate_<name>``.
        general: Whether to offer ``delegate``, a sub-agent with the main agent's model and
            tools (not ``main_only`` ones).
        limits: Limits of the general sub-agent.

    Delegations of one response run in parallel (up to ``Limits.max_concurrent_tool_calls``).
    What the models read is in the runtime's ``Texts`` (``subagent_*``, ``delegate_*``...),
    the descriptions of the delegation tools too (set for each model call).
    """

    name = "subagents"

    def __init__(
        self,
        delegates: Sequence[Delegate] = (),
        *,
        general: bool = True,
        limits: Limits | None = None,
    ) -> None:
        names = [d.name for d in delegates]
        if len(set(names)) != len(names):
            raise UsageError(f"delegate names must be unique, got {names}")
        if not delegates and not general:
            raise UsageError("SubAgents needs delegates or general=True")
        self.delegates = {d.name: d for d in delegates}
        self.general = general
        self.limits = limits or Limits(max_iterations=10)
        self.handle: RunHandle | None = None
        self.texts: Texts = default_texts()
        self._agents: dict[str, Agent] = {}
        self._lock = asyncio.Lock()
        # Delegations whose child completed: call id -> tool name. Their child runs may
        # still have background tasks going, whose endings give the child a new turn.
        self.delegated: dict[str, str] = {}
        self._later = Usage()  # children's later turns' usage, not yet counted in the run's

    def for_run(self) -> SubAgents:
        """An instance for one run (child agents are built once per run, on first use)."""
        clone = SubAgents(tuple(self.delegates.values()), general=self.general, limits=self.limits)
        return clone

    def attach(self, handle: RunHandle) -> None:
        """Keep the run's handle (delegations drive child runs through it) and its texts."""
        self.handle = handle
        self.texts = texts_of(handle)

    def save_state(self) -> Any:
        """The completed delegations, whose child runs may be woken by their tasks."""
        return {"delegated": dict(self.delegated)} if self.delegated else None

    def restore_state(self, state: Any) -> None:
        """Load ``save_state``'s delegations (``None``: a new run)."""
        self.delegated = dict((state or {}).get("delegated", {}))

    def take_usage(self) -> Usage:
        """The usage of children's later turns (``on_restore``) since last taken."""
        taken, self._later = self._later, Usage()
        return taken

    def tool_names(self) -> set[str]:
        """The names of the delegation tools."""
        names = {f"delegate_{n}" for n in self.delegates}
        return names | {"delegate"} if self.general else names

    # -- tools -------------------------------------------------------------------------------

    def tools(self) -> Sequence[Tool]:
        """The delegation tools (main agent only; several may run at once)."""
        out = []
        if self.general:
            out.append(self._tool(None))
        out += [self._tool(d) for d in self.delegates.values()]
        return out

    def _tool(self, spec: Delegate | None) -> Tool:
        ext = self
        texts = default_texts()  # the run's texts replace these in each request (wrap_model)

        async def delegate(task: str, ctx: ToolContext) -> Any:
            return await ext.of(ctx).delegate(spec, task, ctx)

        if spec is None:
            name, description = "delegate", texts.delegate_description
        else:
            name, description = f"delegate_{spec.name}", spec.description
        delegate.__doc__ = f"{description}\n\nArgs:\n    task: {texts.delegate_task_arg}"
        return tool(name=name, main_only=True, side_effects=True, concurrency_key="")(delegate)

    async def wrap_model(self, call: ModelCall, next: ModelNext) -> ModelResponse:
        """Describe the delegation tools to the model in the run's texts."""
        names = self.tool_names()
        request = call.request
        if not any(d.name in names for d in request.tools):
            return await next(call)
        tools = [self._described(d) if d.name in names else d for d in request.tools]
        return await next(replace(call, request=replace(request, tools=tools)))

    def _described(self, definition: ToolDefinition) -> ToolDefinition:
        texts = self.texts
        description = definition.description
        if definition.name == "delegate":
            description = texts.delegate_description
        parameters = definition.parameters
        task = parameters.get("properties", {}).get("task")
        if isinstance(task, dict):
            task = {**task, "description": texts.delegate_task_arg}
            properties = {**parameters["properties"], "task": task}
            parameters = {**parameters, "properties": properties}
        return replace(definition, description=description, parameters=parameters)

    # -- delegation --------------------------------------------------------------------------

    async def delegate(self, spec: Delegate | None, task: str, ctx: ToolContext) -> Any:
        """Drive the child run of this delegation call to its end and return its result."""
        handle = self.handle
        if handle is None:
            raise UsageError("SubAgents is not attached to a run")
        agent = await self._agent(spec, handle)
        result = await handle.run_subagent(agent, call_id=ctx.call_id, task=task)
        await handle.record_subcalls(ctx.call_id, result.calls)
        ctx.report_usage(result.usage)
        if result.status == "completed" and not handle.subagent:
            self.delegated[ctx.call_id] = "delegate" if spec is None else f"delegate_{spec.name}"
        if result.status != "completed":
            texts = ctx.texts
            why = why_unfinished(result, texts, agent.limits)
            raise SubAgentFailed(texts.subagent_failed.format(why=why))
        if spec is not None and spec.output is not None:
            return result.completion
        return result.text or ""

    async def _agent(self, spec: Delegate | None, handle: RunHandle) -> Agent:
        key = spec.name if spec is not None else ""
        async with self._lock:
            agent = self._agents.get(key)
            if agent is None:
                agent = _child_agent(spec, handle, self.limits, self.texts)
                self._agents[key] = agent
            return agent

    async def on_restore(self, run_id: str) -> None:
        """Give each child run its tasks' endings woke a new turn; tell this run its answer.

        A completed delegation's child run takes new input only from its background tasks'
        notifications. On Temporal the children are workflows of their own and this finds
        none in the workflow's store (they signal their parent instead).
        """
        handle = self.handle
        if handle is None or handle.subagent:
            return
        for call_id, tool_name in list(self.delegated.items()):
            child_id = child_run_id(handle.run_id, call_id)
            if not await handle.store.pending(child_id, 0):
                continue
            child = await handle.child_snapshot(call_id)
            if child is None or child.run.status != "completed":
                continue  # ended otherwise (cancelled, reviewed): not driven again
            spec = self.delegates.get(tool_name.removeprefix("delegate_"))
            agent = await self._agent(spec if tool_name != "delegate" else None, handle)
            result = await handle.run_subagent(agent, call_id=call_id, task="")
            # The child's usage is its run's, over every turn: the delegation counted the
            # turns before this one.
            self._later = self._later + (result.usage - child.run.usage)
            await handle.record_subcalls(call_id, result.calls)
            after = await handle.child_snapshot(call_id)
            turn = after.checkpoint.turn if after is not None else 0
            texts = self.texts
            if result.status == "completed":
                answer = result.text if result.text is not None else result.completion
                message = follow_up(call_id, child_id, turn, texts, answer=answer)
            else:
                why = why_unfinished(result, texts, agent.limits)
                message = follow_up(call_id, child_id, turn, texts, why=why)
            await handle.store.append(run_id, message)

    async def recover_call(self, record: CallRecord) -> CallRecord | None:
        """Resume a delegation a crash interrupted, unless its child left an unknown effect."""
        if record.name not in self.tool_names() or self.handle is None:
            return None
        texts = self.texts
        return await recover_child_call(
            self.handle, record, lambda names: texts.delegation_interrupted.format(names=names)
        )


async def recover_child_call(
    handle: RunHandle, record: CallRecord, review_text: Callable[..., str]
) -> CallRecord:
    """Recover a call that drives a child run (a delegation, a forked skill) a crash cut off.

    ``resume_child_or_review`` decides. When the call needs review, the child run is ended
    (``RunHandle.end_child``) before the call's record is saved, so a crash in between still
    finds the child ended, and the call needs review again rather than resuming it.

    Args:
        handle: The run's handle.
        record: The interrupted call (status ``running``).
        review_text: Gives the model-visible result from ``names=`` (the unknown calls).

    Returns:
        The call's next record: ``queued`` or ``needs_review``.
    """
    child = await handle.child_snapshot(record.id)
    calls = child.calls if child is not None else []
    ended = child is not None and child.run.error_kind == SubAgentInterrupted.__name__
    recovered = resume_child_or_review(record, calls, review_text, child_ended=ended)
    if child is not None and recovered.status == "needs_review":
        unknown = ", ".join(sorted({c.name for c in _unknown(calls)})) or "a call"
        reason = (
            f"the process died while this sub-agent ran {unknown}, whose outcome is unknown; "
            f"call {record.id!r} of run {handle.run_id!r} needs review and this run is not "
            "continued"
        )
        await handle.end_child(record.id, child, reason)
    return recovered


def resume_child_or_review(
    record: CallRecord,
    child_calls: Sequence[CallRecord],
    review_text: Callable[..., str],
    *,
    child_ended: bool = False,
) -> CallRecord:
    """What an interrupted call that drives a child run becomes on resume (pure).

    The call is queued to run again, which resumes the child from its own checkpoint (nothing
    the child finished runs again), unless the child was inside a call with side effects that
    is not replayable: its outcome is unknown, so the call needs review and nothing repeats it.
    A child an earlier recovery already ended (``child_ended``) is not resumed either: the
    calls it settled as ``needs_review`` are the unknown ones.

    Args:
        record: The interrupted call (status ``running``).
        child_calls: The call records of its child run (empty when the child never started).
        review_text: Gives the model-visible result from ``names=`` (the unknown calls).
        child_ended: Whether the child run was ended by a recovery (``SubAgentInterrupted``).

    Returns:
        The call's next record: ``queued`` or ``needs_review``, at a higher ``rev``.
    """
    unknown = _unknown(child_calls)
    if child_ended:
        unknown = [c for c in child_calls if c.status == "needs_review"] or list(child_calls)
    if not unknown and not child_ended:
        return replace(record, rev=record.rev + 1, status="queued", started_at=None)
    names = ", ".join(sorted({c.name for c in unknown}))
    return replace(
        record,
        rev=record.rev + 1,
        status="needs_review",
        result=review_text(names=names),
        completed_at=record.started_at,
    )


def _unknown(child_calls: Sequence[CallRecord]) -> list[CallRecord]:
    """The child's started calls whose outcome a crash left unknown (by recovery's rule)."""
    return [c for c in child_calls if needs_recovery(c) and outcome_unknown(c)]


def follow_up(
    call_id: str,
    child_id: str,
    turn: int,
    texts: Texts,
    *,
    answer: Any = None,
    why: str | None = None,
) -> FeedMessage:
    """The message telling the main run what its sub-agent answered in a later turn.

    Args:
        call_id: The delegation call.
        child_id: Its child run.
        turn: The child's turn that ended (the message's id, ``subagent:<child>:<turn>``,
            makes a repeat a no-op).
        texts: The run's texts.
        answer: The child's answer (its text, or a typed delegate's completion).
        why: Why the turn did not complete (``why_unfinished``); ``None``: it completed.
    """
    if why is None:
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        content = texts.subagent_follow_up.format(call_id=call_id, text=text)
    else:
        content = texts.subagent_follow_up_failed.format(call_id=call_id, why=why)
    return FeedMessage(
        id=f"subagent:{child_id}:{turn}",
        role="system",
        content=content,
        meta={"steadyrun.subagent": child_id},
    )


def why_unfinished(result: RunResult, texts: Texts, limits: Limits) -> str:
    """Why a sub-agent's run did not complete, in the run's texts (``{why}`` of failures).

    Args:
        result: The sub-agent's run.
        texts: The run's texts.
        limits: The sub-agent's limits.
    """
    stop = result.budget_exceeded
    if stop is not None:  # the error a reload gives has the message only: this has the budget
        return texts.subagent_over_budget.format(measure=stop.measure, limit=f"{stop.limit:g}")
    error = result.error
    if error is None:
        return texts.subagent_would_wait
    if isinstance(error, IterationLimitExceeded):
        return texts.subagent_hit_limit.format(limit=f"max_iterations={limits.max_iterations}")
    if isinstance(error, InvalidModelOutput | CorrectionsExhausted):
        return texts.subagent_bad_output
    if isinstance(error, ContentFiltered):
        return texts.subagent_filtered
    if isinstance(error, ModelCallFailed):
        return texts.subagent_model_failed.format(error=str(error))
    return f"{type(error).__name__}: {error}"


def _child_agent(spec: Delegate | None, handle: RunHandle, limits: Limits, texts: Texts) -> Agent:
    main = handle.agent
    if spec is None:
        return Agent(
            name=f"{main.name}.subagent",
            model=main.client,
            instructions=texts.subagent_instructions,
            tools=handle.subagent_tools(),
            limits=limits,
            settings=main.settings,
            deps=main.deps,
            can_suspend=False,
        )
    tools: list[Tool | Callable[..., Any]] = (
        list(spec.tools) if spec.tools is not None else list(handle.subagent_tools())
    )
    guard = None
    instructions = spec.instructions or texts.subagent_instructions
    if spec.output is not None:
        tools.append(_output_tool(spec.output, texts))
        guard = _UseOutputTool(texts)
        instructions += "\n\n" + texts.subagent_output_instructions
    return Agent(
        name=f"{main.name}.{spec.name}",
        model=spec.model if spec.model is not None else main.client,
        instructions=instructions,
        tools=tools,
        limits=spec.limits,
        deps=main.deps,
        guard=guard,
        can_suspend=False,
    )


def _output_tool(output: Any, texts: Texts) -> Tool:
    async def submit_result(result: Any) -> Any:
        return result

    submit_result.__annotations__ = {"result": output, "return": output}
    submit_result.__doc__ = (
        f"{texts.submit_result_description}\n\nArgs:\n    result: {texts.submit_result_arg}"
    )
    return tool(completion=True, replayable=True)(submit_result)


class _UseOutputTool:
    """A typed delegate answers through its output tool, not in plain text."""

    def __init__(self, texts: Texts) -> None:
        self.texts = texts

    def review(self, view: GuardView) -> Verdict:
        return Correct(prompt=self.texts.subagent_use_output_tool)
