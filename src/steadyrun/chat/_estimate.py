"""The token estimate of a model request: a documented rule, no model needed.

Every 4 bytes of UTF-8 text (message text, thinking, tool-call arguments, tool results,
instructions, and each tool definition's JSON) count as one token, rounded up per piece; each
message adds 4 tokens and each tool definition 8 for the provider's framing; an image counts as
1,000 tokens and any other media (a PDF, audio) as 2,000.

It lives with the chat types because it reads nothing else: context management keeps runs
inside their window with it (``steadyrun.context`` exports it), and provider adapters fall back
on it where a provider cannot count a part of a request.
"""

from __future__ import annotations

import json

from steadyrun.chat._messages import (
    MediaPart,
    MediaRef,
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "OTHER_MEDIA_TOKENS",
    "TOOL_OVERHEAD",
    "estimate_message",
    "estimate_request",
    "media_tokens",
    "text_tokens",
    "tool_tokens",
]

MESSAGE_OVERHEAD = 4
TOOL_OVERHEAD = 8
IMAGE_TOKENS = 1_000
OTHER_MEDIA_TOKENS = 2_000


def text_tokens(text: str) -> int:
    """A token per 4 bytes of UTF-8, rounded up."""
    return (len(text.encode()) + 3) // 4


def media_tokens(ref: MediaRef) -> int:
    """The flat count of one media part: an image, or any other media."""
    return IMAGE_TOKENS if ref.mime.startswith("image/") else OTHER_MEDIA_TOKENS


def estimate_message(message: Message) -> int:
    """The estimated tokens of one message (see the module docstring for the rule)."""
    total = MESSAGE_OVERHEAD
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            total += text_tokens(part.text)
        elif isinstance(part, ToolCallPart):
            total += text_tokens(part.name) + text_tokens(part.arguments) + 4
        elif isinstance(part, ToolResultPart):
            total += text_tokens(part.content) + 4
            total += sum(media_tokens(m) for m in part.media)
        elif isinstance(part, MediaPart):
            total += media_tokens(part.ref)
    return total


def tool_tokens(tool: ToolDefinition) -> int:
    """The estimated tokens of one tool definition, with its framing."""
    return TOOL_OVERHEAD + text_tokens(
        tool.name + tool.description + json.dumps(tool.parameters, separators=(",", ":"))
    )


def estimate_request(request: ModelRequest) -> int:
    """The estimated tokens of a whole request: instructions, messages and tool definitions."""
    return (
        text_tokens(request.instructions)
        + sum(estimate_message(m) for m in request.messages)
        + sum(tool_tokens(t) for t in request.tools)
    )
