"""Agent versions: the fingerprint a run records, and what a resume under another one does.

A run records the fingerprint of the agent it last ran under (``RunRecord.agent_version``):
a hash of its instructions, its tools' names and argument schemas, and its model. Runs live
for weeks, and the code that resumes one may define its agent differently. The rule:

- Compatible changes proceed: the run goes on under the agent it is resumed with.
- A call waiting for a decision or an answer whose tool no longer exists is settled
  ``failed`` with a model-visible error (``Texts.tool_removed``); it never runs. A queued
  call whose tool is gone is refused as any call to an unknown tool is.
- A call waiting for a decision (approved or not yet decided) whose tool's schema changed
  since it asked is never run on that decision: if its arguments no longer fit the new
  schema it is settled ``failed`` (``Texts.tool_changed``); otherwise a new record of the
  same call replaces it in the batch (``<id>.v2``) and goes through the tool's current
  policy, so a confirmation asks for a new decision. The old record is ``cancelled`` with its
  decision kept, and points to the new one (``SUPERSEDED_BY``).
- A rejected call stays rejected; calls the host owns (awaited, detached, submitted) are
  the host's.

An app pins older versions by listing them: ``Runtime(agents=[v1, v2])`` resumes each run
under the version whose fingerprint it recorded, and a run of any other version under the
last one listed.
"""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from steadyrun._errors import UsageError
from steadyrun.records import CallRecord
from steadyrun.tools import Tool, ToolArgumentsError, describe_issues

if TYPE_CHECKING:
    from steadyrun._texts import Texts
    from steadyrun.runtime._agent import Agent
    from steadyrun.runtime._state import RunState

__all__ = [
    "SUPERSEDED_BY",
    "SUPERSEDES",
    "TOOL_VERSION",
    "AgentFingerprint",
    "AgentVersions",
    "agent_fingerprint",
    "reconcile_batch",
    "tool_version",
]

TOOL_VERSION = "steadyrun.tool_version"
"""Note key: the version of the tool a call waiting for a decision was held under."""
SUPERSEDED_BY = "steadyrun.superseded_by"
"""Note key: the record that replaced this one (its tool changed while it waited)."""
SUPERSEDES = "steadyrun.supersedes"
"""Note key: the record this one replaced."""

# Words of a schema, not its shape: a reworded docstring is not a new schema.
_ANNOTATIONS = frozenset({"title", "description", "examples", "$comment"})
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"}
)


@dataclass(kw_only=True, frozen=True, slots=True)
class AgentFingerprint:
    """What identifies a version of an agent, for one run.

    Attributes:
        version: A short hash of the rest: what ``RunRecord.agent_version`` stores.
        instructions: A hash of the run's instructions.
        model: The model's name (its spec, or the client's ``model`` or ``name``).
        tools: Each tool's version (a hash of its name and argument schema), by name.
    """

    version: str
    instructions: str
    model: str
    tools: dict[str, str] = field(default_factory=dict)


def _digest(value: Any, size: int) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def _shape(schema: Any) -> Any:
    """A JSON schema without its annotations."""
    if isinstance(schema, list):
        return [_shape(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _shape(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS or key in _SCHEMA_ONE:
            out[key] = _shape(value)
        else:
            out[key] = value  # data (enum, const, required, default...) or a keyword's value
    return out


_TOOL_VERSIONS: weakref.WeakKeyDictionary[Agent, dict[str, str]] = weakref.WeakKeyDictionary()


def tool_version(tool: Tool) -> str:
    """The version of a tool: a hash of its name and the shape of its argument schema."""
    return _digest({"name": tool.name, "parameters": _shape(tool.parameters)}, 12)


def _tool_versions(agent: Agent) -> dict[str, str]:
    # Hashing every schema again for each run would cost as the tool list grows: once per agent.
    found = _TOOL_VERSIONS.get(agent)
    if found is None:
        found = _TOOL_VERSIONS[agent] = {t.name: tool_version(t) for t in agent.toolset}
    return found


def agent_fingerprint(agent: Agent, run_id: str = "") -> AgentFingerprint:
    """The fingerprint of ``agent`` for the run ``run_id`` (instructions may depend on it).

    Args:
        agent: The agent.
        run_id: The run; only an agent whose instructions are a function of it needs it.
    """
    from steadyrun.runtime._agent import model_key

    return _fingerprint(agent, agent.instructions_for(run_id), model_key(agent))


def _fingerprint(agent: Agent, text: str, model: str) -> AgentFingerprint:
    instructions = _digest(text, 16)
    tools = dict(_tool_versions(agent))
    version = _digest({"instructions": instructions, "model": model, "tools": tools}, 16)
    return AgentFingerprint(version=version, instructions=instructions, model=model, tools=tools)


_VERSIONS: weakref.WeakKeyDictionary[Agent, tuple[str, str, str]] = weakref.WeakKeyDictionary()


def agent_version(agent: Agent, run_id: str = "") -> str:
    """``agent_fingerprint(agent, run_id).version``, what a run records of its agent.

    Remembered per agent with the instructions and model it was made of (an agent changed in
    place is hashed anew; its tools, like ``_tool_versions``, are taken as they were): an
    execution starts with it, and hashing the same agent for every run cost the service 1%
    of its CPU.
    """
    from steadyrun.runtime._agent import model_key

    text, model = agent.instructions_for(run_id), model_key(agent)
    held = _VERSIONS.get(agent)
    if held is not None and held[0] == text and held[1] == model:
        return held[2]
    version = _fingerprint(agent, text, model).version
    _VERSIONS[agent] = (text, model, version)
    return version


def _static_version(agent: Agent) -> str:
    """A version that tells agents apart without a run (instructions by function, if one)."""
    words = agent.instructions
    key = (
        words
        if isinstance(words, str)
        else f"{getattr(words, '__module__', '')}.{getattr(words, '__qualname__', id(words))}"
    )
    from steadyrun.runtime._agent import model_key

    return _digest({"instructions": key, "model": model_key(agent), "t": _tool_versions(agent)}, 16)


class AgentVersions:
    """The agents a runtime knows, several versions of one name allowed."""

    def __init__(self) -> None:
        self._by_name: dict[str, list[Agent]] = {}

    def add(self, agent: Agent) -> None:
        """Know ``agent``; a new version of a name becomes that name's current version.

        Raises:
            UsageError: Another agent of that name has the same fingerprint: a run could not
                tell which of the two it belongs to.
        """
        known = self._by_name.setdefault(agent.name, [])
        if any(a is agent for a in known):
            return
        mine = _static_version(agent)
        if any(_static_version(a) == mine for a in known):
            raise UsageError(
                f"two different agents are named {agent.name!r} with the same fingerprint "
                "(instructions, tools and model); runs find their agent by name and "
                "fingerprint, so give one another name or change what differs"
            )
        known.append(agent)

    def current(self, name: str) -> Agent | None:
        """The version of ``name`` added last."""
        known = self._by_name.get(name)
        return known[-1] if known else None

    def for_run(self, name: str, run_id: str, version: str | None) -> Agent | None:
        """The version a run resumes under: the one it recorded, else the current one."""
        known = self._by_name.get(name)
        if not known:
            return None
        if version is not None and len(known) > 1:
            for agent in known:
                if agent_fingerprint(agent, run_id).version == version:
                    return agent
        return known[-1]

    def all(self) -> Iterable[Agent]:
        """Every version of every name."""
        for versions in self._by_name.values():
            yield from versions


# -- resuming under another version ----------------------------------------------------------


def reconcile_batch(state: RunState, agent: Agent, texts: Texts, now: datetime) -> bool:
    """Apply the rule of the module docstring to the open batch; whether anything changed.

    Changes are made to ``state`` only (unsaved calls, the batch, blocks): the caller saves
    them in one step, so a crash never leaves a new record without the batch pointing to it.
    """
    changed = False
    batch = list(state.cp.batch)
    for i, call_id in enumerate(batch):
        record = state.calls[call_id]
        if record.handover or record.status not in ("awaiting_decision", "awaiting_input"):
            continue  # queued calls meet prepare's checks; the rest never run again
        if record.decision is not None and not record.decision.approve:
            continue  # rejected: it never runs, whatever its tool became
        shown = record.provider_call_id or record.id
        tool = agent.toolset.get(record.name)
        if tool is None:
            _fail(state, record, texts.tool_removed.format(name=record.name, call_id=shown), now)
            changed = True
            continue
        stamp = record.notes.get(TOOL_VERSION)
        if record.status != "awaiting_decision" or stamp in (None, tool_version(tool)):
            continue
        try:
            tool.validate(record.arguments)  # the model's own: an edit was approved for the old
        except ToolArgumentsError as exc:
            error = describe_issues(exc, texts)
            message = texts.tool_changed.format(name=record.name, call_id=shown, error=error)
            _fail(state, record, message, now)
            changed = True
            continue
        batch[i] = _supersede(state, record, tool, now)
        changed = True
    state.cp.batch = batch
    return changed


def _fail(state: RunState, record: CallRecord, error: str, now: datetime) -> None:
    failed = replace(record, rev=record.rev + 1, status="failed", error=error, completed_at=now)
    state.put_call(failed, saved=False)


def _supersede(state: RunState, record: CallRecord, tool: Tool, now: datetime) -> str:
    """Replace ``record`` by a new queued record of the same call; the new id."""
    root = re.sub(r"\.v\d+$", "", record.id)
    n = 2
    while f"{root}.v{n}" in state.calls:
        n += 1
    new_id = f"{root}.v{n}"
    fresh = CallRecord(
        id=new_id,
        parent_id=record.parent_id,
        model_call_id=record.model_call_id,
        provider_call_id=record.provider_call_id,
        name=record.name,
        arguments=record.arguments,
        rev=1,
        status="queued",
        replayable=tool.replayable,
        side_effects=tool.side_effects,
        notes={SUPERSEDES: record.id},
    )
    old = replace(
        record,
        rev=record.rev + 1,
        status="cancelled",
        completed_at=now,
        notes={**record.notes, SUPERSEDED_BY: new_id},
    )
    state.put_call(old, saved=False)
    state.put_call(fresh, saved=False)
    for block in state.blocks:
        if block.call_id == record.id:
            state.change_block(replace(block, call_id=new_id))
    return new_id
