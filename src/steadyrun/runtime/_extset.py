"""The extensions of one run: their instances, hook chains and saved state."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from steadyrun._codec import to_plain
from steadyrun._errors import UsageError
from steadyrun.chat import Message, ModelResponse, Usage
from steadyrun.records import CallRecord, Checkpoint
from steadyrun.runtime._extension import (
    Extension,
    ModelCall,
    ToolBatch,
    ToolCall,
    TurnView,
    overrides,
)

__all__ = ["EXT_STATE", "ExtensionSet", "check_extensions"]

EXT_STATE = "steadyrun.ext"
"""Key of extension states: in ``Checkpoint.extra``, and in the notes of a call record that
changed one (so a crash between that record and the next checkpoint loses nothing)."""

log = logging.getLogger("steadyrun.extensions")


def check_extensions(extensions: Sequence[Extension]) -> None:
    """Refuse templates that are not extensions or share a name."""
    seen: set[str] = set()
    for ext in extensions:
        if not isinstance(ext, Extension):
            raise UsageError(f"extensions must be Extension instances, got {type(ext).__name__}")
        if not ext.name or not isinstance(ext.name, str):
            raise UsageError(f"extension {type(ext).__name__} needs a non-empty name")
        if ext.name in seen:
            raise UsageError(
                f"two extensions are named {ext.name!r}; names key saved state, so they must "
                "be unique within a run"
            )
        seen.add(ext.name)


class ExtensionSet:
    """A run's extension instances, with their hooks composed into chains."""

    def __init__(self, instances: Sequence[Extension]) -> None:
        self.instances = list(instances)
        self.by_name = {e.name: e for e in self.instances}
        self._saved: dict[str, Any] = {}
        self._shown: dict[str, Any] = {}
        self._implementing: dict[str, list[Extension]] = {}

    @classmethod
    def for_run(cls, templates: Sequence[Extension], saved: dict[str, Any]) -> ExtensionSet:
        """Fresh instances for one run, each restored from its saved state (or ``None``)."""
        instances = []
        for template in templates:
            instance = template.for_run()
            instance.restore_state(saved.get(template.name))
            instances.append(instance)
        out = cls(instances)
        out._saved = {k: v for k, v in saved.items() if k in out.by_name}
        return out

    @classmethod
    def restored(
        cls, templates: Sequence[Extension], checkpoint: Checkpoint, batch: Sequence[CallRecord]
    ) -> ExtensionSet:
        """A run's instances, in the state its checkpoint and the calls of its open batch left."""
        ext = cls.for_run(templates, dict(checkpoint.extra.get(EXT_STATE) or {}))
        if checkpoint.phase == "batch":  # states changed by calls settled after the checkpoint
            settled = [r for r in batch if r.completed_at is not None]
            settled.sort(key=lambda r: (r.completed_at, r.rev))
            ext.overlay(settled)
        return ext

    def overlay(self, records: Sequence[CallRecord]) -> None:
        """Apply extension states that settled call records carry, oldest first."""
        for record in records:
            note = record.notes.get(EXT_STATE)
            if not note:
                continue
            states = json.loads(note)
            for name, state in states.items():
                ext = self.by_name.get(name)
                if ext is not None:
                    ext.restore_state(state)
                    self._saved[name] = state

    # -- state -------------------------------------------------------------------------------

    def _current(self) -> dict[str, Any]:
        out = {}
        for ext in self._with("save_state"):
            out[ext.name] = to_plain(ext.save_state(), Any)
        return out

    def changed_states(self) -> dict[str, Any]:
        """States that changed since they were last taken; they count as taken now."""
        changed = {k: v for k, v in self._current().items() if self._saved.get(k) != v}
        self._saved.update(changed)
        return changed

    def all_states(self) -> dict[str, Any]:
        """Every state, for the checkpoint; they count as taken now."""
        self._saved = self._current()
        return dict(self._saved)

    def published(self) -> dict[str, Any]:
        """What the extensions publish, by name (extensions publishing nothing left out)."""
        out = {}
        for ext in self.instances:
            value = ext.publish()
            if value is not None:
                out[ext.name] = value
        return out

    def changed_publications(self) -> dict[str, Any]:
        """Published values that changed since last asked (``None``: no longer published)."""
        now = self.published()
        changed = {k: v for k, v in now.items() if self._shown.get(k) != v}
        changed.update({k: None for k in self._shown if k not in now})
        self._shown = now
        return changed

    def take_usage(self) -> Usage:
        """Usage of the extensions' own model calls since last taken."""
        total = Usage()
        for ext in self._with("take_usage"):
            total = total + ext.take_usage()
        return total

    @property
    def reserved_tokens(self) -> int:
        """Tokens the extensions add to every request."""
        return sum(ext.reserved_tokens for ext in self.instances)

    # -- what they add -----------------------------------------------------------------------

    def instructions(self, base: str, view: TurnView) -> str:
        """The agent's instructions with every extension's text appended."""
        parts = [base] if base else []
        for ext in self.instances:
            text = ext.instructions(view)
            if text:
                parts.append(text)
        return "\n\n".join(parts)

    # -- chains ------------------------------------------------------------------------------

    async def call_model(
        self, call: ModelCall, model: Callable[[ModelCall], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """``model`` wrapped by every extension's model middleware, the first outermost."""
        response: ModelResponse = await _chain(self._with("wrap_model"), "wrap_model", call, model)
        return response

    async def review_batch(self, batch: ToolBatch) -> ToolBatch:
        """The batch after every extension's review."""

        async def done(b: ToolBatch) -> ToolBatch:
            return b

        reviewed: ToolBatch = await _chain(self._with("review_batch"), "review_batch", batch, done)
        return reviewed

    async def run_tool(self, call: ToolCall, body: Callable[[ToolCall], Awaitable[Any]]) -> Any:
        """A tool body wrapped by every extension's tool middleware."""
        return await _chain(self._with("wrap_tool"), "wrap_tool", call, body)

    async def recover(self, record: CallRecord) -> CallRecord | None:
        """The first extension's answer on how to recover a started call, if any."""
        for ext in self._with("recover_call"):
            out = await ext.recover_call(record)
            if out is not None:
                return out
        return None

    # -- observers ---------------------------------------------------------------------------

    async def notify(self, method: str, *args: Any) -> None:
        """Call an observer hook on every extension; a failing one is logged, the run goes on."""
        for ext in self._with(method):
            try:
                await getattr(ext, method)(*args)
            except Exception:
                log.exception("extension %r failed in %s; the run continues", ext.name, method)

    async def claimed(self, run_id: str, messages: list[Message]) -> None:
        """Tell the extensions new input entered the context."""
        await self.notify("on_claim", run_id, messages)

    def _with(self, method: str) -> list[Extension]:
        # Asked at every model and tool call: which instances implement a hook never changes.
        found = self._implementing.get(method)
        if found is None:
            found = self._implementing[method] = [e for e in self.instances if overrides(e, method)]
        return found


async def _chain(exts: list[Extension], method: str, value: Any, last: Any) -> Any:
    nxt = last
    for ext in reversed(exts):
        nxt = partial(_stage, getattr(ext, method), nxt)
    return await nxt(value)


async def _stage(hook: Any, nxt: Any, value: Any) -> Any:
    return await hook(value, nxt)
