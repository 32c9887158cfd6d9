"""Keeping a run's context fit for the next model call: the context manager and the reducer."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import replace

from steadyrun._texts import Texts
from steadyrun.chat import Message, ModelRequest
from steadyrun.context import ContextEvent, ContextManager
from steadyrun.models import resolve_model
from steadyrun.runtime._agent import Agent, ReducerView
from steadyrun.runtime._observers import ObserverSet
from steadyrun.runtime._state import RunState

__all__ = ["context_manager", "fit_context", "reduce_context"]


def context_manager(
    agent: Agent,
    reserved_tokens: int,
    emit: Callable[[ContextEvent], Awaitable[None]],
    texts: Texts,
) -> ContextManager | None:
    """The context manager of a run of ``agent`` (``None`` without a context policy).

    ``reserved_tokens`` are kept free besides the policy's own (the extensions' text).
    """
    policy = agent.context
    if policy is None:
        return None
    if reserved_tokens:
        policy = replace(policy, reserved_tokens=policy.reserved_tokens + reserved_tokens)

    def pinned(name: str) -> bool:
        tool = agent.toolset.get(name)
        return tool is not None and tool.retain in ("keep", "intact")

    summarizer = (
        resolve_model(policy.summary_model) if policy.summary_model is not None else agent.client
    )
    return ContextManager(policy, model=summarizer, pinned=pinned, emit=emit, texts=texts)


async def reduce_context(
    agent: Agent,
    state: RunState,
    model_call_id: str,
    build: Callable[[list[Message]], ModelRequest],
) -> bool:
    """Apply the agent's context reducer; whether it rewrote the context."""
    reducer = agent.context_reducer
    if reducer is None:
        return False
    view = ReducerView(
        run_id=state.run_id,
        model_call_id=model_call_id,
        turn=state.cp.turn,
        iteration=state.cp.iteration + 1,
    )
    reduced = reducer(view, build(list(state.context)))
    if inspect.isawaitable(reduced):
        reduced = await reduced
    if reduced is None or list(reduced) == state.context:
        return False
    state.rewrite(list(reduced))
    return True


async def fit_context(
    manager: ContextManager | None,
    agent: Agent,
    state: RunState,
    observers: ObserverSet,
    model_call_id: str,
    build: Callable[[list[Message]], ModelRequest],
) -> bool:
    """Context management, then the reducer, before a model call; whether they rewrote it.

    A rewritten context must be saved before the model sees it (the caller saves).
    """
    rewritten = False
    if manager is not None:
        new, usage = await manager.fit(state.context, build)
        if new is not None:
            state.rewrite(new)
            rewritten = True
        if usage.requests:  # a summary is a model call of the run's own
            state.run.usage = state.run.usage + usage
    if await reduce_context(agent, state, model_call_id, build):
        rewritten = True
        event = ContextEvent(kind="reduced", tokens_before=0, tokens_after=0)
        await observers.emit("on_context", state.run_id, event)
    return rewritten
