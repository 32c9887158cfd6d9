"""What the ``steadyrun`` commands work on: ``--app module:attribute`` or ``--store URL``.

``--app`` names an object holding the agents and the store: a ``steadyrun.service.App``, an
``Operations``, a ``Runtime``, or a function (sync or async, no arguments) returning one. The
module is imported from the current directory too. ``--store`` names a store alone, enough for
the commands that read runs and write decisions: ``sqlite:PATH`` (or a path ending in ``.db``)
or a ``postgresql://`` URL. A SQLite file that is not there is a usage error (a mistyped path
must not become an empty store) unless the command asks to create it (``--create``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steadyrun._cli_errors import CommandLineError
from steadyrun.runtime import Runtime
from steadyrun.stores import SqliteStore, Store

__all__ = ["STORE_ENV", "Target", "load_target", "open_store"]

STORE_ENV = "STEADYRUN_STORE"
"""Environment variable with the default ``--store``."""

APP_ENV = "STEADYRUN_APP"
"""Environment variable with the default ``--app``."""


@dataclass(slots=True)
class Target:
    """The runtime the commands use, and the object ``--app`` named (if any).

    Attributes:
        runtime: A runtime on the store, with the app's agents.
        app: What ``--app`` named, after calling it if it was a function.
        spec: The ``--app`` value, when the runs were found that way.
        where: The store in words for messages (a SQLite path, "the PostgreSQL store").
    """

    runtime: Runtime
    app: Any = None
    spec: str | None = None
    where: str = "this store"

    @property
    def store(self) -> Store:
        """The store."""
        return self.runtime.store


def open_store(url: str, *, create: bool = False) -> Store:
    """A store from a ``--store`` value; a SQLite file must exist unless ``create``."""
    if url.startswith(("postgresql://", "postgres://")) or url.startswith("host="):
        from steadyrun.stores import PostgresStore

        return PostgresStore(url)
    path = url.removeprefix("sqlite:")
    if url.startswith("sqlite:") or path.endswith((".db", ".sqlite", ".sqlite3")):
        # Checked before the store opens the file, which would create it.
        if not create and not Path(path).is_file():
            raise CommandLineError(
                f"no SQLite file {path} (is the path right?); pass --create to make a new store"
            )
        return SqliteStore(path)
    raise CommandLineError(f"--store {url!r}: use sqlite:PATH or a postgresql:// URL")


def _where(store: Store, spec: str | None) -> str:
    if isinstance(store, SqliteStore):
        return str(store.path)
    if type(store).__name__ == "PostgresStore":
        return "the PostgreSQL store"
    return f"the store of --app {spec}" if spec else "this store"


async def load_target(app: str | None, store: str | None, *, create: bool = False) -> Target:
    """Resolve ``--app`` (first) or ``--store`` (or their environment variables)."""
    app = app or os.environ.get(APP_ENV)
    store = store or os.environ.get(STORE_ENV)
    if app:
        found = await _load_app(app)
        runtime = getattr(found, "runtime", None)
        if isinstance(found, Runtime):
            runtime = found
        if not isinstance(runtime, Runtime):
            raise CommandLineError(
                f"--app {app!r} is a {type(found).__name__}: name an App, Operations or Runtime "
                "(or a function returning one)"
            )
        return Target(runtime=runtime, app=found, spec=app, where=_where(runtime.store, app))
    if store:
        opened = open_store(store, create=create)
        return Target(runtime=Runtime(opened), where=_where(opened, None))
    raise CommandLineError(
        f"say where the runs are: --app module:attribute or --store URL ({STORE_ENV})"
    )


async def _load_app(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandLineError(f"--app takes module:attribute, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandLineError(f"--app {spec!r}: cannot import {module_name!r}: {exc}") from exc
    found: Any = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise CommandLineError(f"--app {spec!r}: {module_name} has no {attribute!r}") from None
    plain = not isinstance(found, (type, Runtime)) and not hasattr(found, "runtime")
    if callable(found) and plain:
        found = found()
        if inspect.isawaitable(found):
            found = await found
    return found


TEMPORAL_ADDRESS_ENV = "STEADYRUN_TEMPORAL_ADDRESS"
"""Environment variable with the Temporal frontend (``host:port``) of runs Temporal executes."""

TASK_QUEUE_ENV = "STEADYRUN_TASK_QUEUE"
"""Environment variable with the Temporal task queue runs start on (default ``steadyrun``)."""


def temporal_engine(address: str | None, task_queue: str | None, *, worker: bool = False) -> Any:
    """A ``TemporalEngine`` on ``address`` (or ``STEADYRUN_TEMPORAL_ADDRESS``), connecting later.

    Raises:
        CommandLineError: No address, or the temporal extra is not installed.
    """
    address = address or os.environ.get(TEMPORAL_ADDRESS_ENV)
    if not address:
        raise CommandLineError(
            f"the Temporal engine needs the frontend's address: --temporal-address HOST:PORT "
            f"or {TEMPORAL_ADDRESS_ENV}"
        )
    try:
        from steadyrun.temporal import TemporalEngine
    except ImportError as exc:
        raise CommandLineError(
            f"the Temporal engine is not available: {exc} (pip install 'steadyrun[temporal]')"
        ) from exc
    queue = task_queue or os.environ.get(TASK_QUEUE_ENV) or "steadyrun"
    return TemporalEngine(address, task_queue=queue, worker=worker)


async def engine_host(t: Target, run_id: str) -> Any:
    """The ``App`` that reaches ``run_id`` on the engine executing it, when that is Temporal.

    ``None`` for a run the built-in engine executes (the commands write to the store). For a
    run Temporal executes (its claim's owner says so): ``--app``'s ``App`` when its engine is
    Temporal's, else an ``App`` on a ``TemporalEngine`` at ``STEADYRUN_TEMPORAL_ADDRESS``.

    Raises:
        CommandLineError: Temporal executes the run and no address says where it is.
    """
    from steadyrun.service import App
    from steadyrun.stores._leases import foreign_engine

    holder = await t.store.leases.holder(run_id.split("/", 1)[0])
    if holder is None or foreign_engine(holder.owner) != "temporal":
        return None
    if isinstance(t.app, App) and t.app.engine.name == "temporal":
        return t.app
    if not os.environ.get(TEMPORAL_ADDRESS_ENV):
        raise CommandLineError(
            f"run {run_id!r} executes on Temporal: set {TEMPORAL_ADDRESS_ENV} (and "
            f"{TASK_QUEUE_ENV}) so the command reaches it there"
        )
    return App(t.runtime, engine=temporal_engine(None, None), worker=False)
