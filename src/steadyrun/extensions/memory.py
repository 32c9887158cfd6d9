"""Memory: recall relevant memories before each turn, extract new ones when a run completes.

Recall searches a ``MemoryBank`` with the new user input each time input enters the run and
shows the found memories in the instructions. They are kept in the extension's saved state, so a
resumed run shows its model the same memories. Extraction asks a model, with one structured
call, which memories a finished conversation adds, changes or makes wrong, and applies that.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from steadyrun._errors import UsageError
from steadyrun._texts import Texts, default_texts, texts_of
from steadyrun.chat import Message, Usage
from steadyrun.extensions._memory_embed import SentenceEmbedder, minilm_embedder
from steadyrun.extensions._memory_sqlite import SqliteMemoryBank
from steadyrun.extensions._memory_store import (
    Embed,
    InMemoryMemoryBank,
    MemoryBank,
    MemoryItem,
    ScoredMemory,
)
from steadyrun.models._client import ModelClient
from steadyrun.models._structured import StructuredOutputError, generate_object
from steadyrun.runtime._extension import Extension, TurnView
from steadyrun.tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from steadyrun.runtime._extension import RunHandle

__all__ = [
    "EXTRACT_INSTRUCTIONS",
    "Embed",
    "ExtractionResult",
    "InMemoryMemoryBank",
    "Memory",
    "MemoryBank",
    "MemoryChange",
    "MemoryChanges",
    "MemoryItem",
    "ScoredMemory",
    "SentenceEmbedder",
    "SqliteMemoryBank",
    "minilm_embedder",
]

log = logging.getLogger("steadyrun.extensions.memory")

EXTRACT_INSTRUCTIONS = """\
You maintain long-term memories about the user, kept across conversations. Read the \
conversation and the existing memories, and list the changes to make:
- add: a new lasting fact, preference or decision about the user (one per memory, a short \
sentence in the third person, e.g. "The user's dog is called Rex").
- update: an existing memory the conversation refines or corrects (give its id and new text).
- delete: an existing memory the conversation shows is wrong or no longer true (give its id).
Leave out small talk, one-off requests and anything already remembered. No changes: an empty \
list."""
"""The English instructions of the extraction call (``Texts().memory_extract_instructions``)."""


class MemoryChange(BaseModel):
    """One change to the memories, as the extraction model proposes it.

    Attributes:
        op: ``add`` a memory, ``update`` one's text, or ``delete`` one.
        id: The memory to update or delete (``mem3``...).
        text: The text to add, or the new text of an update.
    """

    op: Literal["add", "update", "delete"]
    id: str | None = Field(default=None, description="the memory to update or delete")
    text: str | None = Field(default=None, description="the memory's text (add, update)")


class MemoryChanges(BaseModel):
    """The changes a conversation makes to the memories.

    Attributes:
        changes: In order; an empty list when nothing is worth remembering.
    """

    changes: list[MemoryChange] = Field(default_factory=list)


@dataclass(kw_only=True, slots=True)
class ExtractionResult:
    """What one extraction did.

    Attributes:
        added: Memories added.
        updated: Memories updated (as they are now).
        deleted: Ids of memories deleted.
        ignored: Changes not applied, each with the reason.
        usage: Tokens of the extraction's model calls.
    """

    added: list[MemoryItem] = field(default_factory=list)
    updated: list[MemoryItem] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    ignored: list[tuple[MemoryChange, str]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


class Memory(Extension):
    """Long-term memories for an agent's runs, kept in a ``MemoryBank``.

    Recall: each time user input enters a run, the bank is searched with its text and the best
    ``recall_limit`` memories are shown in the instructions ("Relevant memories: ...") until
    the next input. Extract: when a run completes a turn, a structured model call derives
    changes (add, update, delete) from the messages since the last extraction and applies them;
    a failure is logged and never fails the run. Extraction runs at least once per completed
    turn: a crash between it and the run's next checkpoint may run it again.

    Args:
        bank: Where memories live.
        namespace: A name, or a function of the run id giving one (one user's memories, say).
        recall_limit: Memories shown per turn (0: no recall).
        min_score: Leave out recalled memories scoring below this (``None``: keep all).
        extract: Whether completed turns are extracted automatically.
        extract_model: The extraction model (a ``"provider:model"`` spec or a client); by
            default the agent's.
        extract_instructions: The extraction model's instructions (default: the runtime's
            ``Texts.memory_extract_instructions``; English outside a run).
        max_existing: Existing memories shown to the extraction model at most (the most
            relevant ones when the namespace holds more).
        tools: Whether the model gets ``remember(text)`` and ``forget(memory_id)``.
        reserved_tokens: Tokens kept free in the context window for the recalled memories.
    """

    name = "memory"

    def __init__(
        self,
        bank: MemoryBank,
        *,
        namespace: str | Callable[[str], str] = "default",
        recall_limit: int = 5,
        min_score: float | None = None,
        extract: bool = True,
        extract_model: str | ModelClient | None = None,
        extract_instructions: str | None = None,
        max_existing: int = 50,
        tools: bool = False,
        reserved_tokens: int = 256,
    ) -> None:
        if recall_limit < 0 or max_existing < 0:
            raise UsageError("recall_limit and max_existing must be 0 or more")
        self.bank = bank
        self.namespace = namespace
        self.recall_limit = recall_limit
        self.min_score = min_score
        self.extract_enabled = extract
        self.extract_model = extract_model
        self.extract_instructions = extract_instructions
        self.max_existing = max_existing
        self.with_tools = tools
        self.reserved_tokens = reserved_tokens
        self._reset()

    def _reset(self) -> None:
        self.texts: Texts = default_texts()
        self._run_id: str | None = None
        self._client: ModelClient | None = None
        self._recalled: list[dict[str, str]] = []
        self._extracted_through = 0
        self._usage = Usage()
        self._lock = asyncio.Lock()

    def for_run(self) -> Memory:
        """A new instance for one run, sharing the bank."""
        run = copy.copy(self)
        run._reset()
        return run

    def attach(self, handle: RunHandle) -> None:
        """Remember the run and its model (the default extraction model).

        Args:
            handle: The run's handle.
        """
        self._run_id = handle.run_id
        self._client = handle.agent.client
        self.texts = texts_of(handle)

    # -- state ---------------------------------------------------------------------------------

    def save_state(self) -> Any:
        """The recalled memories and how much of the context was extracted."""
        return {"recalled": list(self._recalled), "extracted_through": self._extracted_through}

    def restore_state(self, state: Any) -> None:
        """Load saved state (``None``: nothing recalled yet).

        Args:
            state: What ``save_state`` returned.
        """
        if state is None:
            self._recalled, self._extracted_through = [], 0
            return
        self._recalled = [{"id": str(m["id"]), "text": str(m["text"])} for m in state["recalled"]]
        self._extracted_through = int(state["extracted_through"])

    @property
    def recalled(self) -> list[tuple[str, str]]:
        """The memories shown to the model this turn, as ``(id, text)``."""
        return [(m["id"], m["text"]) for m in self._recalled]

    def namespace_for(self, run_id: str) -> str:
        """The namespace of a run's memories.

        Args:
            run_id: The run.
        """
        return self.namespace(run_id) if callable(self.namespace) else self.namespace

    def take_usage(self) -> Usage:
        """Usage of the extraction calls since last taken."""
        usage, self._usage = self._usage, Usage()
        return usage

    # -- recall --------------------------------------------------------------------------------

    def instructions(self, view: TurnView) -> str | None:
        """The recalled memories (and, with tools, how to keep memories), main agent only.

        Args:
            view: The model call about to be made.
        """
        if view.subagent:
            return None
        texts = self.texts
        parts = []
        if self.with_tools:
            parts.append(texts.memory_tools_instructions)
        if self._recalled:
            lines = "\n".join(f"- [{m['id']}] {m['text']}" for m in self._recalled)
            parts.append(texts.memory_recalled.format(memories=lines))
        return "\n".join(parts) or None

    async def on_claim(self, run_id: str, messages: Sequence[Message]) -> None:
        """Search the bank with the new user input; keep the results for the coming calls.

        Args:
            run_id: The run that took the input.
            messages: The input.
        """
        if run_id != self._run_id or self.recall_limit == 0:
            return  # a sub-agent's task, or recall is off
        query = "\n".join(m.text for m in messages if m.role == "user" and m.text).strip()
        if not query:
            return
        try:
            found = await self.bank.search(self.namespace_for(run_id), query, self.recall_limit)
        except Exception:
            log.exception("memory recall failed for run %r; the turn goes on without it", run_id)
            self._recalled = []
            return
        if self.min_score is not None:
            found = [s for s in found if s.score >= self.min_score]
        self._recalled = [{"id": s.item.id, "text": s.item.text} for s in found]

    # -- extraction ----------------------------------------------------------------------------

    async def on_complete(self, run_id: str, messages: Sequence[Message]) -> None:
        """Extract memories from the messages since the last extraction (logged on failure).

        Args:
            run_id: The run.
            messages: Its context.
        """
        if not self.extract_enabled or run_id != self._run_id:
            return
        start = self._extracted_through if self._extracted_through < len(messages) else 0
        try:
            await self.extract(messages[start:], namespace=self.namespace_for(run_id))
        except Exception:
            log.exception("memory extraction failed for run %r; the run is not affected", run_id)
            return
        self._extracted_through = len(messages)

    async def extract(
        self, messages: Sequence[Message], *, namespace: str | None = None
    ) -> ExtractionResult:
        """Derive memory changes from a conversation with one structured call; apply them.

        Changes to unknown ids, blank texts and copies of existing memories are ignored (and
        logged). The usage is returned and also counted in ``take_usage()``.

        Args:
            messages: The conversation.
            namespace: Whose memories (default: the attached run's, or the fixed namespace).

        Raises:
            UsageError: No model or namespace to use.
            StructuredOutputError: The model gave no valid answer.
        """
        ns = self._resolve_namespace(namespace)
        model = self.extract_model or self._client
        if model is None:
            raise UsageError("Memory.extract needs extract_model outside a run")
        talk = _render_conversation(messages)
        result = ExtractionResult()
        if not talk:
            return result
        async with self._lock:
            existing = await self.bank.list(ns)
            if len(existing) > self.max_existing:
                found = await self.bank.search(ns, talk, self.max_existing)
                existing = [s.item for s in found]
            texts = self.texts
            shown = "\n".join(f"- [{m.id}] {m.text}" for m in existing) or texts.memory_none
            prompt = texts.memory_extract_prompt.format(memories=shown, conversation=talk)
            instructions = self.extract_instructions or texts.memory_extract_instructions
            try:
                answer = await generate_object(model, MemoryChanges, instructions, prompt)
            except StructuredOutputError as exc:
                self._count(replace(exc.usage, requests=exc.attempts))
                raise
            result.usage = replace(answer.usage, requests=answer.attempts)
            self._count(result.usage)
            await self._apply(ns, answer.value.changes, {m.id for m in existing}, result)
        return result

    async def _apply(
        self, ns: str, changes: list[MemoryChange], known: set[str], result: ExtractionResult
    ) -> None:
        texts = {_norm(m.text) for m in await self.bank.list(ns)}
        for change in changes:
            text = (change.text or "").strip()
            reason = None
            if change.op != "delete" and not text:
                reason = "no text"
            elif change.op != "add" and change.id not in known:
                reason = f"unknown id {change.id!r}"
            elif change.op != "delete" and _norm(text) in texts:
                reason = "already remembered"
            if reason is not None:
                log.info("memory change %s ignored: %s", change.model_dump(), reason)
                result.ignored.append((change, reason))
                continue
            if change.op == "add":
                result.added.append(await self.bank.add(ns, text, metadata=self._meta()))
            elif change.op == "update":
                assert change.id is not None
                result.updated.append(await self.bank.update(ns, change.id, text))
            else:
                assert change.id is not None
                if await self.bank.delete(ns, change.id):
                    result.deleted.append(change.id)
                known.discard(change.id)
            texts.add(_norm(text))

    def _resolve_namespace(self, namespace: str | None) -> str:
        if namespace is not None:
            return namespace
        if self._run_id is not None:
            return self.namespace_for(self._run_id)
        if isinstance(self.namespace, str):
            return self.namespace
        raise UsageError("Memory.extract needs a namespace outside a run")

    def _meta(self) -> dict[str, Any]:
        return {"run_id": self._run_id} if self._run_id is not None else {}

    def _count(self, usage: Usage) -> None:
        self._usage = self._usage + usage

    # -- tools ---------------------------------------------------------------------------------

    def tools(self) -> Sequence[Tool]:
        """``remember`` and ``forget`` when enabled (main agent only)."""
        if not self.with_tools:
            return ()
        ext = self

        @tool(main_only=True, replayable=True, concurrency_key="")
        async def remember(text: str, ctx: ToolContext) -> str:
            """Keep a lasting fact about the user for later conversations.

            Args:
                text: The fact, one short sentence (e.g. "The user's dog is called Rex").
                ctx: The call's context, filled by the runtime.
            """
            run = ext.of(ctx)
            ns = run.namespace_for(ctx.run_id)
            same = [m for m in await run.bank.list(ns) if _norm(m.text) == _norm(text)]
            if same:  # a repeated call (after a crash, say) adds nothing twice
                return ctx.texts.memory_already.format(memory_id=same[0].id)
            item = await run.bank.add(ns, text, metadata={"run_id": ctx.run_id})
            return ctx.texts.memory_remembered.format(memory_id=item.id)

        @tool(main_only=True, replayable=True, concurrency_key="")
        async def forget(memory_id: str, ctx: ToolContext) -> str:
            """Drop a memory that is wrong or no longer true.

            Args:
                memory_id: The memory (``mem3``...), as shown among the relevant memories.
                ctx: The call's context, filled by the runtime.
            """
            run = ext.of(ctx)
            if await run.bank.delete(run.namespace_for(ctx.run_id), memory_id):
                return ctx.texts.memory_forgot.format(memory_id=memory_id)
            return ctx.texts.memory_unknown.format(memory_id=memory_id)

        return (remember, forget)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _render_conversation(messages: Sequence[Message], *, limit: int = 4000) -> str:
    lines = []
    for m in messages:
        if m.role in ("user", "assistant") and m.text.strip():
            body = m.text.strip()
            if len(body) > limit:
                body = body[:limit] + " [...]"
            lines.append(f"{m.role}: {body}")
    return "\n".join(lines)
