"""Every sentence the runtime writes to the model, in one place a host can replace."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Texts"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Texts:
    """Model-visible texts the runtime writes. Replace any of them with ``Runtime(texts=...)``.

    Placeholders: ``{name}`` the tool name, ``{call_id}`` the model's call id, ``{available}``
    the tool names, ``{error}`` an error text, ``{reason}`` a host's or reviewer's reason,
    ``{arguments}`` arguments as JSON, ``{feedback}`` a validator's feedback.
    """

    cancelled: str = (
        "Call {call_id} to {name} was cancelled before it started because new input arrived. "
        "Read the new input, then call the tool again if it is still needed."
    )
    interrupted_replayable: str = (
        "Call {call_id} to {name} was interrupted before it finished. It is safe to call it again."
    )
    interrupted: str = (
        "Call {call_id} to {name} was interrupted before it finished; it changed nothing outside "
        "this conversation. Call it again if you still need its result."
    )
    needs_review: str = (
        "Call {call_id} to {name} was interrupted before it finished and may or may not have taken "
        "effect. Do not repeat it before checking whether it took effect."
    )
    unknown_tool: str = "There is no tool named {name!r}. Available tools: {available}."
    invalid_arguments: str = "Invalid arguments for {name}: {error}. Fix them and call again."
    tool_error: str = "{name} failed: {error}"
    length_cut: str = (
        "Your last response was cut off by the output length limit before its tool calls were "
        "complete, so none of them ran. Make the calls again with shorter arguments, or fewer "
        "calls at once."
    )
    cannot_suspend: str = (
        "{name} needs to wait for a person or system, which is not possible here; do without it "
        "or ask the user directly."
    )
    cannot_detach: str = "{name} cannot hand its work to an outside executor here."
    refused: str = "The call to {name} was refused: {reason}"
    rejected: str = "The call to {name} was rejected by a reviewer and did not run{reason}."
    edited_arguments: str = "(A reviewer changed the arguments before approving: {arguments}) "
    completion_not_alone: str = (
        "{name} ends the run and must be called alone, as the only call of a response; none of "
        "the calls ran. Call it again on its own."
    )
    completion_rejected: str = "The result was not accepted: {feedback}"
