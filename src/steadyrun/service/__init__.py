"""The service: operations, workers, an ``App`` of agents, its HTTP API and its web page.

``App``, ``Operations`` and ``Worker`` need nothing beyond steadyrun; they work on every store
(its claims are ``store.leases``). An ``App`` executes runs through its ``Engine``: by default
its embedded worker (``BuiltinEngine``), or Temporal's (``steadyrun.temporal.TemporalEngine``).
``create_app`` needs the ``service`` extra (FastAPI, uvicorn, sse-starlette) and is
imported on first use::

    from steadyrun.service import App, create_app
    api = create_app(App(store, agents=[support]), tokens={"s3cret": "alice"})
    # uvicorn.run(api, host="127.0.0.1", port=8000)

See docs/service.md and docs/worker.md.
"""

from typing import TYPE_CHECKING, Any

from steadyrun.service._app import App, NotSupportedError
from steadyrun.service._builtin import BuiltinEngine
from steadyrun.service._engine import Engine
from steadyrun.service._gate import Token
from steadyrun.service._gc import tune_gc
from steadyrun.service._lifecycle import Deleted, Imported, Retention, RetentionPass
from steadyrun.service._ops import Cancelled, Operations
from steadyrun.service._start import Started, start_fingerprint
from steadyrun.service._worker import Worker, WorkerStats

if TYPE_CHECKING:
    from steadyrun.service._api import TOKENS_ENV as TOKENS_ENV
    from steadyrun.service._api import create_app as create_app

__all__ = [
    "App",
    "BuiltinEngine",
    "Cancelled",
    "Deleted",
    "Engine",
    "Imported",
    "NotSupportedError",
    "Operations",
    "Retention",
    "RetentionPass",
    "Started",
    "Token",
    "Worker",
    "WorkerStats",
    "start_fingerprint",
    "tune_gc",
]

_API = ("TOKENS_ENV", "create_app")


def __getattr__(name: str) -> Any:
    # The HTTP API needs FastAPI (pip install 'steadyrun[service]'): imported on first use.
    if name in _API:
        from steadyrun.service import _api

        value = getattr(_api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, *_API])
