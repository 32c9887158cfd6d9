"""Observers: callbacks on model responses and tool calls that can never change a run."""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta
from steadyrun.context import ContextEvent
from steadyrun.records import CallRecord
from steadyrun.runtime._result import RunResult

__all__ = ["RUN_CALLBACKS", "Observer", "ObserverSet", "extra_observers", "observed"]

log = logging.getLogger("steadyrun.observers")

extra_observers: ContextVar[tuple[Observer, ...]] = ContextVar(
    "steadyrun_extra_observers", default=()
)
"""Observers of the executions started in this context only, besides the runtime's own
(``Runtime.stream`` sets its event sink here, inside the task that runs the execution)."""


RUN_CALLBACKS: frozenset[str] = frozenset(
    {
        "on_run_start",
        "on_run_end",
        "on_model_request",
        "on_model_delta",
        "on_model_response",
        "on_tool_start",
        "on_tool_settle",
    }
)
"""The callbacks of a run's progress: what the library's own observers share (``shares``)."""


class Observer:
    """Subclass and override what you need; methods may be sync or async.

    An observer that raises is isolated: the error is logged and counted in
    ``RunResult.observer_errors``, and the run goes on unchanged. Observers get copies
    (except for the methods named in ``shares``).
    """

    shares: ClassVar[frozenset[str]] = frozenset()
    """Methods given the runtime's own objects instead of copies.

    Only for methods that neither change what they are given nor keep any of it: a copy of a
    model request is a deep copy of the whole context, made at each model call, and one of a
    fragment is made for each fragment. The library's own observers (the display publisher,
    the live broadcaster) name the methods they only read; a subclass that overrides one of
    them to change or keep its arguments must take it out.
    """

    def on_run_start(self, run_id: str, agent: str) -> Any:
        """An execution of the run starts (a new run, or a resume)."""

    def on_run_end(self, run_id: str, status: str, error: str | None = None) -> Any:
        """The execution ended: the run completed, suspended, failed or was cancelled."""

    def on_model_request(self, run_id: str, model_call_id: str, request: ModelRequest) -> Any:
        """A model call of the run is about to be made with ``request``."""

    def on_model_delta(self, run_id: str, model_call_id: str, delta: ResponseDelta) -> Any:
        """A fragment of a streaming model call's text, thinking or tool-call arguments.

        Called while the call runs, only when the model streams (``StreamingModelClient``).
        Fragments are not saved: after a crash the call is made again under the same
        ``model_call_id``, so a display drops the fragments it holds for that id when it sees
        ``on_model_request`` for it again. The fragments of a call concatenate (by
        ``delta.index``) to the text and arguments of its ``on_model_response``.
        """

    def on_model_response(self, run_id: str, model_call_id: str, response: ModelResponse) -> Any:
        """A model call of the run returned ``response``."""

    def on_tool_start(self, run_id: str, call: CallRecord) -> Any:
        """A tool call is about to start its body."""

    def on_tool_settle(self, run_id: str, call: CallRecord) -> Any:
        """A tool call settled (or was handed over)."""

    def on_context(self, run_id: str, event: ContextEvent) -> Any:
        """Context management rewrote the context (or could not) before a model call."""

    def on_publish(self, run_id: str, name: str, value: Any) -> Any:
        """An extension's published value (the ``planning`` extension's plan, say) changed."""


# An observer, its method, its ``wants_now`` and whether it shares the runtime's objects.
_Target = tuple["Observer", Callable[..., Any], Callable[[str], bool] | None, bool]


@dataclass(slots=True)
class ObserverSet:
    """Dispatches to several observers, counting the failures."""

    observers: Sequence[Observer]
    errors: int = 0
    _targets: dict[str, list[_Target]] = field(default_factory=dict, repr=False)

    def _for(self, method: str) -> list[_Target]:
        """The observers that implement ``method``, with it and their ``wants_now``.

        Found once per method: an execution emits the same few events on every iteration.
        """
        targets = self._targets.get(method)
        if targets is None:
            targets = self._targets[method] = [
                (
                    observer,
                    fn,
                    getattr(observer, "wants_now", None),
                    method in getattr(observer, "shares", ()),
                )
                for observer in self.observers
                if (fn := getattr(observer, method, None)) is not None
                and _implements(observer, method)
            ]
        return targets

    def wants(self, method: str, run_id: str | None = None) -> bool:
        """Whether any observer implements ``method`` (so the runtime need not produce it).

        With ``run_id``, an observer that has ``wants_now(run_id)`` (the live broadcaster,
        which listens only while someone follows) counts only when that returns true.
        """
        for _, _, now, _ in self._for(method):
            if run_id is not None and now is not None and not now(run_id):
                continue
            return True
        return False

    async def emit(self, method: str, *args: Any) -> None:
        """Call ``method`` on every observer that has it; failures are logged and counted.

        An observer with ``wants_now`` is skipped while that says no for the run (``args[0]``).
        """
        for observer, fn, now, shared in self._for(method):  # not implemented: no copies
            if now is not None and args and not now(args[0]):
                continue  # told nothing now (the live feed, unfollowed): a copy is the context
            try:
                # Each observer gets its own copy, so one cannot change what another sees
                # (nor the runtime's own objects), unless it only reads them (``shares``).
                out = fn(*args) if shared else fn(*copy.deepcopy(args))
                # None first: a plain method's None would take isawaitable through the
                # abstract classes' checks (a fragment's callbacks are often plain ones).
                if out is not None and inspect.isawaitable(out):
                    await out
            except Exception:
                self.errors += 1
                log.exception("observer %r failed in %s; the run continues", observer, method)


def _implements(observer: Observer, method: str) -> bool:
    """Whether ``observer`` overrides ``method`` (or has it without subclassing ``Observer``)."""
    own = getattr(type(observer), method, None)
    return own is not None and own is not getattr(Observer, method, None)


async def observed(
    observers: ObserverSet, run_id: str, agent: str, execution: Coroutine[Any, Any, RunResult]
) -> RunResult:
    """Run ``execution`` (of a run), telling the observers when it starts and how it ends."""
    await observers.emit("on_run_start", run_id, agent)
    try:
        result = await execution
    except BaseException as exc:
        await observers.emit("on_run_end", run_id, "crashed", type(exc).__name__)
        raise
    error = str(result.error) if result.error is not None else None
    await observers.emit("on_run_end", run_id, result.status, error)
    return result
