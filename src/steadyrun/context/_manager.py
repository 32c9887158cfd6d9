"""Keeping a run's context inside its window before every model call.

In order, while the request is too large for its share of the window: clear old tool rounds;
then summarize the earlier history with a model call (failing safe: a failed summary leaves the
run with clearing only, and says so to observers). Every rewrite replaces the run's context and
is saved once as a new base of the context log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from steadyrun._texts import Texts
from steadyrun.chat import Message, ModelRequest, ModelSettings, TextPart, Usage
from steadyrun.context._policy import ContextPolicy
from steadyrun.context._rounds import (
    SUMMARY_META,
    clear_rounds,
    clearable_bytes,
    split_for_summary,
    texts_or_english,
    transcript,
)
from steadyrun.context._tokens import EstimateCounter, count_tokens, estimate_request
from steadyrun.models import ModelClient

__all__ = ["ContextEvent", "ContextManager"]

log = logging.getLogger("steadyrun.context")


@dataclass(kw_only=True, frozen=True, slots=True)
class ContextEvent:
    """What context management did before a model call (given to observers).

    Attributes:
        kind: ``cleared``, ``summarized``, ``summary_failed``, ``reduced`` or ``over_budget``.
        tokens_before: The request's tokens before.
        tokens_after: ...and after.
        detail: A readable note (e.g. why a summary failed).
    """

    kind: str
    tokens_before: int
    tokens_after: int
    detail: str = ""


class ContextManager:
    """Applies a ``ContextPolicy`` to one run's context.

    Args:
        policy: The policy.
        model: The model that writes summaries.
        pinned: Whether a tool's results are kept (by tool name).
        emit: Tells observers what context management did.
        texts: The notes, summary call and marker the models read (default: English).
    """

    def __init__(
        self,
        policy: ContextPolicy,
        *,
        model: ModelClient,
        pinned: Callable[[str], bool],
        emit: Callable[[ContextEvent], Awaitable[None]],
        texts: Texts | None = None,
    ) -> None:
        self.policy = policy
        self.texts = texts_or_english(texts)
        self.model = model
        self.pinned = pinned
        self.emit = emit
        self.counter = policy.counter or EstimateCounter()
        self._summary_failed_at: int | None = None

    async def fit(
        self,
        context: list[Message],
        build: Callable[[list[Message]], ModelRequest],
    ) -> tuple[list[Message] | None, Usage]:
        """The rewritten context (``None``: unchanged) and the usage of any summary call."""
        policy = self.policy
        request = build(context)
        budget = policy.budget(request.settings.max_tokens)
        tokens = await count_tokens(self.counter, request)
        rewritten: list[Message] | None = None
        usage = Usage()
        # Each clearing is a new base of the log: clear only when it frees about a tenth of
        # the budget (or the summary threshold is reached), so bases stay rare and a step's
        # save stays bounded by the window, not by the history.
        near_summary = tokens > policy.summary_share * budget
        if tokens > policy.clear_share * budget and (
            near_summary
            or clearable_bytes(context, policy.keep_rounds, self.pinned) >= 0.4 * budget
        ):
            cleared = clear_rounds(context, policy.keep_rounds, self.pinned, self.texts)
            if cleared is not None:
                after = await count_tokens(self.counter, build(cleared))
                await self.emit(
                    ContextEvent(kind="cleared", tokens_before=tokens, tokens_after=after)
                )
                rewritten, context, tokens = cleared, cleared, after
        # Summarize past its share, or when clearing could not bring the request under the
        # clearing share (the placeholders of cleared rounds have piled up).
        stuck = rewritten is not None and tokens > policy.clear_share * budget
        if (tokens > policy.summary_share * budget or stuck) and self._may_summarize(context):
            try:
                summarized, usage = await self._summarize(context, budget)
            except Exception as exc:
                self._summary_failed_at = len(context)
                log.warning("summary failed; continuing with clearing only: %s", exc)
                await self.emit(
                    ContextEvent(
                        kind="summary_failed",
                        tokens_before=tokens,
                        tokens_after=tokens,
                        detail=f"{type(exc).__name__}: {exc}",
                    )
                )
            else:
                if summarized is not None:
                    after = await count_tokens(self.counter, build(summarized))
                    await self.emit(
                        ContextEvent(kind="summarized", tokens_before=tokens, tokens_after=after)
                    )
                    rewritten, context, tokens = summarized, summarized, after
        if tokens > budget:
            # Last resort: clear every round that is not pinned, the recent ones too.
            cleared = clear_rounds(context, 0, self.pinned, self.texts)
            if cleared is not None:
                after = await count_tokens(self.counter, build(cleared))
                rewritten, context, tokens = cleared, cleared, after
            if tokens > budget:
                await self.emit(
                    ContextEvent(
                        kind="over_budget",
                        tokens_before=tokens,
                        tokens_after=tokens,
                        detail=f"the request needs {tokens} of {budget}",
                    )
                )
        return rewritten, usage

    def _may_summarize(self, context: list[Message]) -> bool:
        # After a failed summary, wait until the history grew before paying for another try.
        failed = self._summary_failed_at
        return failed is None or len(context) >= failed + 2 * max(1, self.policy.keep_rounds)

    async def _summarize(
        self, context: list[Message], budget: int
    ) -> tuple[list[Message] | None, Usage]:
        policy, texts = self.policy, self.texts
        split = split_for_summary(context, policy.keep_rounds, self.pinned)
        if split is None:
            return None, Usage()
        older, kept, tail = split
        earlier = [m for m in older if (m.meta or {}).get(SUMMARY_META)]
        rest = [m for m in older if not (m.meta or {}).get(SUMMARY_META)]
        # The summary call must fit too: its instruction, the answer's room, and the transcript.
        instructions = policy.summary_instruction or texts.summary_instruction
        instruction = estimate_request(ModelRequest(instructions=instructions))
        room = max(1_000, budget - policy.summary_tokens - instruction - 200)
        head = transcript(earlier, texts)
        body = transcript(rest, texts)
        max_chars = max(0, room * 4 - len(head))
        if len(body) > max_chars:
            body = texts.summary_omitted + "\n" + body[len(body) - max_chars :]
        text = "\n\n".join(t for t in (head, body) if t)
        request = ModelRequest(
            instructions=instructions,
            messages=[Message.user(texts.summary_request.format(transcript=text))],
            settings=ModelSettings(max_tokens=policy.summary_tokens),
        )
        response = await self.model.respond(request)
        summary = response.message.text.strip()
        if not summary:
            raise ValueError("the summary call returned no text")
        summary = summary[: policy.summary_tokens * 4]  # bounded, whatever the model did
        marker = Message(
            role="user",
            parts=[TextPart(text=texts.summary_marker.format(summary=summary))],
            meta={SUMMARY_META: "1"},
        )
        usage = response.usage + Usage()
        usage.requests = 1
        return [marker, *kept, *tail], usage
