"""The request of a model call: the instructions, the tools, and a guard's one-off correction."""

from __future__ import annotations

from collections.abc import Callable

from steadyrun._codec import from_plain
from steadyrun.chat import Message, ModelRequest
from steadyrun.runtime._agent import Agent
from steadyrun.runtime._extension import TurnView
from steadyrun.runtime._extset import ExtensionSet
from steadyrun.runtime._state import RunState

__all__ = ["CORRECTION", "request_builder"]

CORRECTION = "steadyrun.correction"
"""Checkpoint ``extra`` key: a guard's correction (the rejected answer and the guard's prompt),
shown to the next model call only."""


def request_builder(
    agent: Agent, state: RunState, ext: ExtensionSet | None, *, subagent: bool
) -> Callable[[list[Message]], ModelRequest]:
    """How the next model call's request is made from a context (fitting tries several).

    The instructions are the agent's with the extensions' text for this turn and iteration;
    a pending correction follows the context but never enters the run's history.
    """
    cp = state.cp
    correction = cp.extra.get(CORRECTION)
    extra = from_plain(correction, list[Message]) if correction else []
    instructions = agent.instructions_for(state.run_id)
    if ext is not None:
        view = TurnView(
            run_id=state.run_id,
            agent=agent.name,
            subagent=subagent,
            turn=cp.turn,
            iteration=cp.iteration + 1,
        )
        instructions = ext.instructions(instructions, view)
    tools = agent.toolset.definitions()

    def build(context: list[Message]) -> ModelRequest:
        return ModelRequest(
            instructions=instructions,
            messages=[*context, *extra],
            tools=tools,
            settings=agent.settings,
        )

    return build
