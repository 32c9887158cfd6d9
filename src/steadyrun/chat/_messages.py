"""Provider-neutral chat types: messages and their parts, requests, responses, deltas, usage.

These are plain keyword-only dataclasses with a literal ``kind`` tag. Providers map them to and
from their SDK types; anything provider-specific travels in ``provider_details``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

__all__ = [
    "FinishReason",
    "MediaPart",
    "MediaRef",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Part",
    "ResponseDelta",
    "ResponseFormat",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolChoice",
    "ToolDefinition",
    "ToolResultPart",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from. ``tool`` messages carry the results of one batch of tool calls."""

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error"]
"""Why the model stopped: only ``tool_calls`` makes the runtime execute tools."""

ToolChoice = Literal["auto", "none", "required"]
"""Whether the model may, must not, or must call a tool."""


@dataclass(kw_only=True, slots=True)
class MediaRef:
    """A reference to media the host stores; records never hold media bytes.

    Attributes:
        key: Identifies the media for the host's media reader.
        mime: The MIME type, e.g. ``image/png``.
        size: Size in bytes.
        sha256: Hex digest of the bytes, checked before the media reaches a model.
    """

    key: str
    mime: str
    size: int
    sha256: str | None = None


@dataclass(kw_only=True, slots=True)
class TextPart:
    """Plain text."""

    kind: Literal["text"] = "text"
    text: str


@dataclass(kw_only=True, slots=True)
class ThinkingPart:
    """The model's reasoning, kept so it can be sent back where a provider requires it.

    Attributes:
        text: The reasoning text (may be empty when the provider only returns a signature).
        signature: An opaque token some providers need to accept the thinking back.
        provider_details: Provider-specific extras (e.g. redacted thinking data).
    """

    kind: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None
    provider_details: dict[str, Any] | None = None


@dataclass(kw_only=True, slots=True)
class ToolCallPart:
    """A tool call the model requested.

    Attributes:
        call_id: The identifier the model (provider) gave the call.
        name: The tool name as the model wrote it.
        arguments: The arguments as the raw JSON text the model produced (may be malformed).
    """

    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str = "{}"
    provider_details: dict[str, Any] | None = None


@dataclass(kw_only=True, slots=True)
class ToolResultPart:
    """The result of one tool call, as the model sees it.

    Attributes:
        call_id: The provider call id of the call this answers.
        name: The tool name of that call.
        content: The model-visible result text.
        is_error: Whether the result reports an error the model may correct.
        media: Media attached to the result, by reference.
    """

    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    media: list[MediaRef] = field(default_factory=list)


@dataclass(kw_only=True, slots=True)
class MediaPart:
    """Media in a message, by reference."""

    kind: Literal["media"] = "media"
    ref: MediaRef


Part = Annotated[
    TextPart | ThinkingPart | ToolCallPart | ToolResultPart | MediaPart,
    Field(discriminator="kind"),
]
"""Any part of a message."""


@dataclass(kw_only=True, slots=True)
class Message:
    """One message of a conversation: a role and ordered parts.

    Attributes:
        role: Who the message is from.
        parts: The content, in order.
        id: For input messages, the host's message id (deduplication key with ``revision``).
        revision: The revision of the message with this id; a new revision enters history again.
        meta: Host data passed through untouched.
    """

    kind: Literal["message"] = "message"
    role: Role
    parts: list[Part] = field(default_factory=list)
    id: str | None = None
    revision: str | None = None
    meta: dict[str, str] | None = None

    @classmethod
    def user(cls, text: str, *, id: str | None = None, revision: str | None = None) -> Message:
        """A user message of plain text."""
        return cls(role="user", parts=[TextPart(text=text)], id=id, revision=revision)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls of this message, in order."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]


@dataclass(kw_only=True, slots=True)
class ToolDefinition:
    """A tool as the model sees it.

    Attributes:
        name: Provider-safe tool name.
        description: What the tool does (from its docstring).
        parameters: JSON schema of the arguments object.
        strict: Whether the provider should enforce the schema exactly, where it can.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@dataclass(kw_only=True, slots=True)
class ResponseFormat:
    """Ask for a JSON answer matching a schema, where the provider can enforce it natively.

    Attributes:
        name: A name for the schema (providers that need one get it).
        schema: The JSON schema of the answer.
        strict: Whether the provider should enforce the schema exactly.
    """

    name: str
    schema: dict[str, Any]
    strict: bool = True


@dataclass(kw_only=True, slots=True)
class ModelSettings:
    """Options for a model call; ``None`` leaves the provider's default.

    Attributes:
        temperature: Sampling temperature.
        max_tokens: Most tokens to generate.
        stop: Sequences that end generation.
        tool_choice: ``auto``, ``none``, ``required``, or the name of one tool the model must call.
        parallel_tool_calls: Whether the model may ask for several calls at once.
        response_format: A JSON schema for the answer (native structured output).
        extra: Provider-specific options, passed to the provider's request as they are.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    tool_choice: ToolChoice | str | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    extra: dict[str, Any] | None = None


@dataclass(kw_only=True, slots=True)
class ModelRequest:
    """Everything one model call receives.

    Attributes:
        instructions: The system instructions.
        messages: The conversation so far.
        tools: Tool definitions in a deterministic order.
        settings: Call options.
    """

    kind: Literal["request"] = "request"
    instructions: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=ModelSettings)


@dataclass(kw_only=True, slots=True)
class Usage:
    """Token usage; adds up with ``+``, and ``later - earlier`` is what was spent between.

    Attributes:
        requests: Model calls made.
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Generated tokens, reasoning included.
        cache_read_tokens: Prompt tokens served from a provider cache.
        cache_write_tokens: Prompt tokens written to a provider cache.
        reasoning_tokens: Generated tokens spent on reasoning.
    """

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            requests=self.requests - other.requests,
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            cache_read_tokens=self.cache_read_tokens - other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens - other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens - other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(kw_only=True, slots=True)
class ModelResponse:
    """What a model call returns.

    Attributes:
        message: The assistant message (text, thinking and tool-call parts).
        finish_reason: Why the model stopped.
        usage: Tokens used by this call (``requests`` is 1 for a real call).
        model_name: The model that answered, as the provider reports it.
        provider_details: Provider extras such as the request id.
    """

    kind: Literal["response"] = "response"
    message: Message
    finish_reason: FinishReason
    usage: Usage = field(default_factory=Usage)
    model_name: str | None = None
    provider_details: dict[str, Any] | None = None


@dataclass(kw_only=True, slots=True)
class ResponseDelta:
    """One streamed fragment of a response.

    Fragments of the same ``index`` belong to one part and are concatenated in order. A
    ``tool_call`` fragment carries ``call_id`` and ``name`` on (at least) its first fragment and
    pieces of the JSON ``arguments``. ``provider_details`` of a thinking or tool-call fragment
    belong to its part (merged over the fragments). A ``finish`` delta (no part) carries the
    finish reason, usage and details of the whole response.
    """

    kind: Literal["delta"] = "delta"
    part: Literal["text", "thinking", "tool_call", "finish"]
    index: int = 0
    text: str = ""
    signature: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    model_name: str | None = None
    provider_details: dict[str, Any] | None = None
