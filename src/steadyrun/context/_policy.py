"""``ContextPolicy``: the knobs of context management, with defaults that keep runs in bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.context._tokens import TokenCounter

__all__ = ["DEFAULT_SUMMARY_INSTRUCTION", "ContextPolicy"]

DEFAULT_SUMMARY_INSTRUCTION = (
    "You compress the earlier part of an agent's conversation so the agent can continue its "
    "work without it. Write a faithful, dense summary: the user's goals and constraints, "
    "decisions made, facts learned from tools (ids, numbers, names), what was done and what is "
    "still open. Do not invent anything. Do not address the user. Plain text only."
)
"""The English instruction of the summary call (``Texts().summary_instruction``)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class ContextPolicy:
    """How a run keeps its model context inside the window.

    Shares are of the window less ``reserved_tokens`` and the call's ``max_tokens``.

    Attributes:
        window: The model's context window, in tokens.
        offload_share: A tool result larger than this share of the window (and than
            ``offload_min_bytes``) is offloaded: the model sees a preview and a reference, and
            reads the rest with the ``read_offloaded_result`` tool.
        offload_min_bytes: Results up to this size are never offloaded.
        preview_chars: How much of an offloaded result the model sees in place.
        clear_share: Past this share, results of tool rounds older than ``keep_rounds`` are
            replaced by a short placeholder (``retain="keep"``/``"intact"`` tools excepted).
        keep_rounds: Recent tool rounds that clearing and summaries keep verbatim.
        summary_share: Past this share (after clearing), earlier history is summarized.
        summary_tokens: Most tokens a summary may take (its call's ``max_tokens``).
        summary_instruction: The instruction of the summary call; ``None``: the runtime's
            ``Texts.summary_instruction`` (English by default, Chinese with
            ``Texts.chinese()``).
        summary_model: The model that writes summaries (default: the agent's).
        counter: Counts request tokens (default: the documented estimate).
        reserved_tokens: Tokens something outside the run's state adds to every request.
    """

    window: int
    offload_share: float = 0.10
    offload_min_bytes: int = 4_000
    preview_chars: int = 1_500
    clear_share: float = 0.60
    keep_rounds: int = 2
    summary_share: float = 0.80
    summary_tokens: int = 2_000
    summary_instruction: str | None = None
    summary_model: Any = None
    counter: TokenCounter | None = None
    reserved_tokens: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.window < 1_000:
            problems.append(f"window must be at least 1000 tokens, got {self.window}")
        for name in ("offload_share", "clear_share", "summary_share"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                problems.append(f"{name} must be in (0, 1], got {value}")
        if self.clear_share > self.summary_share:
            problems.append("clear_share must not be above summary_share (clearing comes first)")
        if self.keep_rounds < 0 or self.preview_chars < 0 or self.offload_min_bytes < 0:
            problems.append("keep_rounds, preview_chars and offload_min_bytes must be >= 0")
        if not 0 < self.summary_tokens < self.window // 2:
            problems.append("summary_tokens must be positive and below half the window")
        if not 0 <= self.reserved_tokens < self.window // 2:
            problems.append("reserved_tokens must be >= 0 and below half the window")
        if problems:
            raise UsageError("invalid ContextPolicy: " + "; ".join(problems))

    def budget(self, max_tokens: int | None = None) -> int:
        """Tokens a request may take: the window less reservations and the answer's room."""
        return self.window - self.reserved_tokens - (max_tokens or 0)

    def offload_bytes(self) -> int:
        """Results larger than this many bytes are offloaded (4 bytes per token)."""
        return max(self.offload_min_bytes, int(self.window * self.offload_share * 4))
