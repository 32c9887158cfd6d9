"""``CompatModel``: a model behind any OpenAI-compatible Chat Completions server.

Ollama, vLLM, llama.cpp's ``llama-server``, LM Studio, OpenRouter and the like. Needs the
``openai`` extra. Choose one by name with ``"compat:<base url>#<model>"``, e.g.
``"compat:http://localhost:11434/v1#llama3.2"``. See ``docs/providers/compat.md``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
import openai

from steadyrun._errors import UsageError
from steadyrun.models._openai_chat import ChatDialect
from steadyrun.models._openai_common import MediaReader, MediaUrl, env_first
from steadyrun.models._retry import RetryPolicy
from steadyrun.models.openai import OpenAIChatModel

__all__ = ["CompatModel"]

PLACEHOLDER_KEY = "not-needed"
"""The API key sent when none is configured (local servers accept any)."""


class CompatModel(OpenAIChatModel):
    """A model behind an OpenAI-compatible Chat Completions server.

    The Chat Completions mapping of ``OpenAIChatModel``, with what these servers do differently:
    ``max_tokens`` instead of ``max_completion_tokens``; reasoning read from
    ``reasoning_content`` or ``reasoning`` and sent back in the same field; responses and chunks
    without ids or usage; tool calls without ids (given ``call_0``, ``call_1``... by position)
    or indexes; ``stop`` as the finish reason of tool calls.

    Args:
        model: ``<base url>#<model>`` (``http://localhost:11434/v1#llama3.2``), or just the
            model name with ``base_url`` (or ``client``) given.
        api_key: The API key (default: ``COMPAT_API_KEY``, then ``OPENAI_API_KEY``, then
            ``"not-needed"``).
        base_url: The server's base URL (the part before ``#`` when the model has one).
        client: An ``openai.AsyncOpenAI`` to use (its own retries are turned off).
        http_client: An ``httpx.AsyncClient`` for the SDK client this model creates.
        retry: How failed calls are retried (default ``RetryPolicy()``).
        timeout: Seconds a request may take (local models can be slow: raise it).
        media_reader: Returns the bytes of a ``MediaRef`` (images and PDFs, base64).
        media_url: Returns a URL the server can fetch an image from (tried first).
        **defaults: Default ``ModelSettings`` fields.

    Attributes:
        base_url: The server's base URL.
    """

    provider: ClassVar[str] = "compat"
    key_env: ClassVar[str] = "COMPAT_API_KEY"
    dialect: ClassVar[ChatDialect] = ChatDialect(
        provider="compat", max_tokens_field="max_tokens", send_reasoning=True, null_content=False
    )

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        media_reader: MediaReader | None = None,
        media_url: MediaUrl | None = None,
        **defaults: Any,
    ) -> None:
        url, sep, name = model.partition("#")
        if sep:
            if not url or not name:
                raise UsageError(
                    f"compat model {model!r} is not '<base url>#<model>', "
                    "e.g. 'http://localhost:11434/v1#llama3.2'"
                )
            if base_url is not None and base_url.rstrip("/") != url.rstrip("/"):
                raise UsageError(
                    f"compat model {model!r} names the server {url!r} and base_url says "
                    f"{base_url!r}: give one"
                )
            base_url = url
        else:
            name = model
        if base_url is None and client is None:
            raise UsageError(
                f"compat model {model!r} needs the server's URL: "
                f"'compat:http://localhost:11434/v1#{model}', or pass base_url=..."
            )
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise UsageError(f"compat base URL {base_url!r} must start with http:// or https://")
        self.base_url = base_url
        super().__init__(
            name,
            api_key=api_key or env_first("COMPAT_API_KEY", "OPENAI_API_KEY") or PLACEHOLDER_KEY,
            base_url=base_url,
            client=client,
            http_client=http_client,
            retry=retry,
            timeout=timeout,
            media_reader=media_reader,
            media_url=media_url,
            **defaults,
        )

    def __repr__(self) -> str:
        return f"CompatModel({self.model!r}, base_url={self.base_url!r})"
