"""A sub-agent's child workflow runs with its parent's extensions, as on the built-in engine.

The built-in engine runs a sub-agent with its parent's extension instances
(``Execution(..., extensions=self.ext, subagent=True)``): the parent's instructions,
middleware and observers see the sub-agent's model and tool calls, the parent's extension
tools work there on the parent's state, and what the sub-agent changes stays. On Temporal the
parent's instances live in the parent's workflow, so (since ``PATCH_SUBAGENT_EXTENSIONS``):

- the app registers each child agent as a ``SharedView``: the child agent with its parent's
  extension templates, its tools its own (the activities of the child's extensions find the
  templates by the child's name);
- the parent starts the child with its instances' states (``RunInput.shared``), the child
  workflow makes its instances from the templates in those states (``for_run``,
  ``restore_state``), runs as a sub-agent with them, and returns their states when it ends
  (``RunOutput.shared``), which the parent's instances take (``restore_state``).

One delegation at a time matches the built-in engine exactly. Delegations running at once
each start from the parent's states when they started, and the last to end sets the states
the parent keeps (on the built-in engine they mutate the same instances as they go). A child
whose tasks outlived its delegation (``_wchildren``) signals each turn's states with its
result; since ``PATCH_SUBAGENT_LATER_TURNS`` its later turns go on from the states its last
turn left (they started from the parent's again before), and the parent takes them whole, as
it takes a delegation's: what the parent changed itself since is replaced (on the built-in
engine both change the same instances). Children started without ``shared`` (histories from
before the patch) run without extensions, as they did.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cached_property
from typing import Any, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from steadyrun._codec import to_plain
    from steadyrun.runtime import Agent
    from steadyrun.runtime._extset import EXT_STATE, ExtensionSet
    from steadyrun.runtime._state import RunState
    from steadyrun.tools import ToolContext, ToolSet


class Engine(Protocol):
    """What these functions read and write of the workflow's ``_wcalls.Engine``."""

    agent: Agent
    shared: dict[str, Any] | None
    shared_set: Any


__all__ = [
    "PATCH_SUBAGENT_EXTENSIONS",
    "PATCH_SUBAGENT_LATER_TURNS",
    "SharedView",
    "child_extensions",
    "parent_states",
    "plain",
    "shared_states",
    "shared_view",
    "take_states",
]

PATCH_SUBAGENT_EXTENSIONS = "steadyrun.subagent-extensions"
"""Marks parents that start their children with their extensions' states."""

PATCH_SUBAGENT_LATER_TURNS = "steadyrun.subagent-later-turns"
"""Marks children whose signalled turns carry their states and go on from them, and parents
that take those states and the usage of their children's later turns (``_wchildren``)."""


class SharedView(Agent):
    """A child agent with its parent's extension templates; its tools are its own.

    (Its toolset is the child's: the parent's extension tools a sub-agent may use are among
    the child's tools already, and ``main_only`` ones stay out.)
    """

    plain: Agent  # the child agent itself, without extensions

    @cached_property
    def toolset(self) -> ToolSet:
        """The child's tools, as given."""
        return ToolSet(list(self.tools))


def shared_view(child: Agent, parent: Agent) -> Agent:
    """``child`` with ``parent``'s extension templates (``child`` when it has none)."""
    if not parent.extensions:
        return child
    values = {f.name: getattr(child, f.name) for f in fields(child) if f.init}
    values["extensions"] = parent.extensions
    view = SharedView(**values)
    view.plain = child
    return view


def plain(agent: Agent) -> Agent:
    """The agent a workflow runs (a ``SharedView``'s child agent)."""
    return agent.plain if isinstance(agent, SharedView) else agent


def child_extensions(engine: Engine, state: RunState, *, new: bool) -> ExtensionSet | None:
    """The child run's instances of its parent's extensions (``None``: it runs without).

    A new child starts from the parent's states; a child that goes on (a continue-as-new)
    from its own checkpoint, as any run; a later turn from the states its last turn left.
    """
    if engine.shared is None:
        return None
    if new:
        state.cp.extra[EXT_STATE] = dict(engine.shared)
    elif engine.shared_set is not None and workflow.patched(PATCH_SUBAGENT_LATER_TURNS):
        # A sub-agent's checkpoint does not keep its instances' states (they are the
        # parent's): without this its later turn would start from the delegation's again.
        state.cp.extra[EXT_STATE] = shared_states(engine)
    ext = ExtensionSet.restored(engine.agent.extensions, state.cp, state.batch_calls())
    engine.shared_set = ext
    return ext


def shared_states(engine: Engine) -> dict[str, Any] | None:
    """The child run's extension states when it ended (``None`` without shared ones)."""
    if engine.shared is None or engine.shared_set is None:
        return None
    # The instances themselves: a sub-agent's checkpoint does not keep their states.
    return {n: to_plain(e.save_state(), Any) for n, e in engine.shared_set.by_name.items()}


def parent_states(ctx: ToolContext) -> dict[str, Any] | None:
    """The states a delegation gives its child: the parent's instances' (``None``: none)."""
    if not ctx.extensions or not workflow.patched(PATCH_SUBAGENT_EXTENSIONS):
        return None
    return {n: to_plain(e.save_state(), Any) for n, e in ctx.extensions.items()}


def take_states(ctx: ToolContext, states: dict[str, Any] | None) -> None:
    """The parent's instances take the states the child ended with."""
    for name, state in (states or {}).items():
        inst = ctx.extensions.get(name)
        if inst is not None:
            inst.restore_state(state)
