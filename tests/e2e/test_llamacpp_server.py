"""CompatModel end to end against a real OpenAI-compatible server: llama.cpp's, on loopback.

The fixture starts ``python -m llama_cpp.server`` with the packaged Gemma 3 270M and the
``chatml-function-calling`` format, waits for ``/v1/models``, and always terminates it. Marked
local_model: `.ci/run` runs these in their own step after installing the local extra.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import steadyrun as sr
from e2e.local_support import (
    INSTRUCTIONS,
    QUESTION,
    WEATHER,
    ToolFirst,
    check_weather_call,
    require_llama,
    timed,
)
from steadyrun.chat import (
    Message,
    ModelRequest,
    ModelSettings,
    TextPart,
    ToolCallPart,
    accumulate_async,
)
from steadyrun.models import model_requests
from steadyrun.models.compat import CompatModel

pytestmark = pytest.mark.local_model

_STARTUP = 120.0  # seconds the server may take to load the model and answer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a llama.cpp server serving the packaged model as ``gemma``."""
    require_llama()
    from steadyrun.models.local import packaged_model_path

    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(packaged_model_path()),
        "--model_alias",
        "gemma",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "2048",
        "--n_threads",
        str(os.cpu_count() or 1),
    ]
    base = f"http://127.0.0.1:{port}/v1"
    with log_path.open("wb") as log:
        start = time.monotonic()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            while not _answers(f"{base}/models"):
                if proc.poll() is not None:
                    pytest.fail(
                        f"the llama.cpp server exited with {proc.returncode}:\n" + _tail(log_path)
                    )
                if time.monotonic() - start > _STARTUP:
                    pytest.fail(
                        f"the llama.cpp server did not answer within {_STARTUP:g} s:\n"
                        + _tail(log_path)
                    )
                time.sleep(0.2)
            print(f"[timing] llama.cpp server startup: {time.monotonic() - start:.2f} s")
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def compat(server: str) -> Iterator[CompatModel]:
    with model_requests(True):
        yield CompatModel(f"{server}#gemma", timeout=120, temperature=0)


def _request(**settings: object) -> ModelRequest:
    return ModelRequest(
        instructions=INSTRUCTIONS,
        messages=[Message(role="user", parts=[TextPart(text=QUESTION)])],
        tools=[WEATHER],
        settings=ModelSettings(**settings),  # type: ignore[arg-type]
    )


def _text_request() -> ModelRequest:
    return ModelRequest(
        messages=[Message(role="user", parts=[TextPart(text="Name three colors.")])],
        settings=ModelSettings(max_tokens=24),
    )


def test_the_server_lists_the_model(server: str) -> None:
    with urllib.request.urlopen(f"{server}/models", timeout=10) as reply:
        models = json.load(reply)
    assert [m["id"] for m in models["data"]] == ["gemma"]


async def test_non_streaming_text(compat: CompatModel) -> None:
    with timed("server: text (respond)"):
        response = await compat.respond(_text_request())
    assert response.finish_reason in ("stop", "length")
    assert response.message.tool_calls == []
    assert response.usage.requests == 1
    assert response.usage.input_tokens > 0
    assert 0 < response.usage.output_tokens <= 24
    assert response.model_name == "gemma"
    assert response.provider_details is not None and response.provider_details["request_id"]


async def test_streaming_text_accumulates_to_the_same_answer(compat: CompatModel) -> None:
    responded = await compat.respond(_text_request())
    with timed("server: text (stream)"):
        streamed = await accumulate_async(compat.stream(_text_request()))
    assert streamed.finish_reason == responded.finish_reason
    assert streamed.message.text == responded.message.text  # temperature 0: the same tokens
    assert streamed.message.tool_calls == []
    assert streamed.model_name == "gemma"


async def test_a_forced_tool_call_is_schema_valid(compat: CompatModel) -> None:
    with timed("server: forced tool call (respond)"):
        response = await compat.respond(_request(tool_choice="get_weather"))
    assert response.finish_reason == "tool_calls"
    (call,) = response.message.parts
    assert isinstance(call, ToolCallPart)
    assert call.name == "get_weather" and call.call_id
    check_weather_call(call.arguments)


async def test_a_streamed_tool_call_accumulates_to_the_same_call(compat: CompatModel) -> None:
    responded = await compat.respond(_request(tool_choice="get_weather"))
    with timed("server: forced tool call (stream)"):
        streamed = await accumulate_async(compat.stream(_request(tool_choice="get_weather")))
    assert streamed.finish_reason == "tool_calls"
    (call,) = streamed.message.tool_calls
    assert call.name == "get_weather" and call.call_id
    assert check_weather_call(call.arguments) == check_weather_call(
        responded.message.tool_calls[0].arguments
    )


async def test_a_two_step_agent_run(compat: CompatModel) -> None:
    seen: list[dict[str, str]] = []

    @sr.tool(replayable=True)
    def get_weather(city: str, unit: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city.
            unit: celsius or fahrenheit.
        """
        seen.append({"city": city, "unit": unit})
        return f"18 degrees {unit}, light rain in {city}"

    agent = sr.Agent(
        name="weather",
        model=ToolFirst(compat),
        instructions=INSTRUCTIONS,
        tools=[get_weather],
        settings=ModelSettings(tool_choice="get_weather", max_tokens=48),
    )
    # The second request carries the assistant's tool call: llama.cpp's server takes it only
    # with a string content ("") beside the tool calls; with null it answers 500 (validation).
    with timed("server: agent run (2 model calls)"):
        result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="e2e-1", input=QUESTION)
    assert result.status == "completed", result.error
    assert len(seen) == 1
    (record,) = result.calls
    assert record.name == "get_weather" and record.status == "succeeded"
    check_weather_call(record.arguments)
    assert result.usage.requests == 2
    assert result.text is not None
