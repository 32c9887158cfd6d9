"""Running llama.cpp off the event loop: one worker thread per model, one request at a time.

``llama_cpp.Llama`` is blocking and not thread-safe. ``LlamaEngine`` owns one ``Llama`` and a
single worker thread that every request runs on, in order, so requests never overlap whatever
event loop they come from. A request counts the tokens llama.cpp evaluates and samples (its
streams carry no usage) and can be stopped between two tokens: the engine wraps the model's
``generate`` loop, which every completion of every chat format runs through.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LlamaEngine", "Meter", "Stopped"]


class Stopped(Exception):
    """The request was stopped between two tokens (its caller was cancelled or went away)."""


@dataclass(slots=True)
class Meter:
    """What one request cost llama.cpp, over all the completions its chat format ran.

    Attributes:
        input_tokens: Prompt tokens, counted once per completion.
        output_tokens: Sampled tokens, end-of-generation tokens left out.
        stop: Set to stop the request at the next token.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


_END = object()


class LlamaEngine:
    """One ``llama_cpp.Llama``, loaded on first use, and the thread all its requests run on.

    Args:
        load: Creates the ``Llama`` (called once, on the worker thread).
        is_end: Whether a sampled token ends generation (llama.cpp does not count those).
    """

    def __init__(self, load: Callable[[], Any], is_end: Callable[[Any, int], bool]) -> None:
        self._load = load
        self._is_end = is_end
        self._llama: Any = None
        self._meter: Meter | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadyrun-llama")

    @property
    def llama(self) -> Any:
        """The ``Llama``, once loaded (``None`` before the first request)."""
        return self._llama

    # -- on the worker thread ----------------------------------------------------------------

    def _ready(self) -> Any:
        if self._llama is None:
            llama = self._load()
            original = llama.generate

            def generate(tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
                meter = self._meter
                if meter is None:  # a call outside a request (the caller's own use)
                    yield from original(tokens, *args, **kwargs)
                    return
                meter.input_tokens += len(tokens)
                inner = original(tokens, *args, **kwargs)
                try:
                    sent: Any = None
                    while True:
                        if meter.stop.is_set():
                            raise Stopped("stopped")
                        try:
                            token = inner.send(sent)
                        except StopIteration:
                            return
                        if not self._is_end(llama, token):
                            meter.output_tokens += 1
                        sent = yield token
                finally:
                    inner.close()

            llama.generate = generate  # every completion samples through it
            self._llama = llama
        return self._llama

    def _run(self, meter: Meter, job: Callable[[Any], Any]) -> Any:
        if meter.stop.is_set():
            raise Stopped("stopped before it started")
        llama = self._ready()
        self._meter = meter
        try:
            return job(llama)
        finally:
            self._meter = None

    # -- on the event loop --------------------------------------------------------------------

    async def load(self) -> None:
        """Load the model now (otherwise the first request does)."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._ready)

    async def call(self, meter: Meter, job: Callable[[Any], Any]) -> Any:
        """Run ``job(llama)`` on the worker thread; cancelling stops it at the next token."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._run, meter, job)
        try:
            return await future
        finally:
            meter.stop.set()  # done already, or cancelled: then stop at the next token

    async def stream(
        self, meter: Meter, start: Callable[[Any], Iterator[Mapping[str, Any]]]
    ) -> AsyncGenerator[Mapping[str, Any], None]:
        """The items of the iterator ``start(llama)`` returns, iterated on the worker thread.

        The thread hands each item to the loop through a queue. When the consumer stops early
        or is cancelled, the thread stops at the next token.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def produce(llama: Any) -> None:
            items = start(llama)
            try:
                for item in items:
                    if meter.stop.is_set():
                        raise Stopped("stopped")
                    put(item)
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()

        def job() -> None:
            try:
                self._run(meter, produce)
            except BaseException as exc:
                put(exc)
            else:
                put(_END)

        loop.run_in_executor(self._executor, job)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            meter.stop.set()

    def close(self) -> None:
        """Stop taking requests; the model is freed once the running one (if any) ends."""
        meter = self._meter
        if meter is not None:
            meter.stop.set()
        self._executor.shutdown(wait=False, cancel_futures=True)
