"""What a running tool may learn about the call it serves."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from steadyrun._texts import Texts, default_texts
from steadyrun.chat import MediaRef

__all__ = ["ToolContext"]


def _english() -> Texts:
    return default_texts()


@dataclass(kw_only=True)
class ToolContext:
    """Facts about one tool call, passed to a tool that declares a ``ToolContext`` parameter.

    The parameter may have any name; it is left out of the tool's JSON schema and the runtime
    fills it for each call.

    Attributes:
        run_id: The run the call belongs to.
        call_id: The id of the call's record, stable across resumes (use it for idempotency).
        tool_name: The name of the tool being called.
        provider_call_id: The id the model provider gave the call.
        deps: Whatever the host passed to the run as dependencies.
        can_suspend: Whether this call may suspend the run (``await_external``,
            ``require_input``); false in sub-agents and runs that forbid it.
        input_state: When the tool is re-entered after ``require_input``: the state it gave.
        input_response: ...and the validated answer.
        edited_arguments: Whether a reviewer edited the arguments before approving the call.
        read_result: The runtime's reader of this run's offloaded and cleared results by
            reference (used by the built-in read tool; ``None`` outside context management).
        extensions: The run's extension instances by name (see ``Extension.of``).
        usage: Token usage of model calls the tool made itself (see ``report_usage``).
        media: Media attached to the call's result (see ``attach``).
        texts: The runtime's model-facing texts (``steadyrun.Texts``), for tools that write
            sentences of the runtime's own (the built-in extensions); English by default.
    """

    run_id: str
    call_id: str
    tool_name: str
    provider_call_id: str
    deps: Any = None
    can_suspend: bool = True
    input_state: Any = None
    input_response: Any = None
    edited_arguments: bool = False
    read_result: Callable[[str], str | None] | None = None
    extensions: Mapping[str, Any] = field(default_factory=dict)
    usage: Any = None
    media: list[MediaRef] = field(default_factory=list)
    texts: Texts = field(default_factory=_english)

    def attach(self, ref: MediaRef) -> None:
        """Attach media (a ``steadyrun.media.MediaRef``) to the call's result.

        Store the bytes yourself first (``steadyrun.media.media_ref`` computes the reference);
        the record keeps only the reference, and the model sees the media with the result.
        """
        if not isinstance(ref, MediaRef):
            raise TypeError(f"attach() takes a MediaRef, got {type(ref).__name__}")
        self.media.append(ref)

    def report_usage(self, usage: Any) -> None:
        """Count a model call the tool made (a ``steadyrun.Usage``) in the run's usage.

        It is kept with the call's record, so it is counted once even across a crash.
        """
        self.usage = usage if self.usage is None else self.usage + usage

    @property
    def resumed_with_input(self) -> bool:
        """Whether this is a re-entry carrying an answer to ``require_input``."""
        return self.input_response is not None
