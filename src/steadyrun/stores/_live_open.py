"""``live_feed``: the live feed of a store, made on first use (see ``steadyrun.stores._live``).

Apart from ``_live`` so that the stores, which close their feed, need not import this module,
which knows every store.
"""

from __future__ import annotations

from steadyrun.stores._live import LiveFeed, MemoryLive
from steadyrun.stores._memory import MemoryStore
from steadyrun.stores._sqlite import SqliteStore

__all__ = ["live_feed"]


def live_feed(store: object) -> LiveFeed | None:
    """The live feed of ``store``, made on first use; ``None`` for a store without one."""
    feed = getattr(store, "_steadyrun_live", None)
    if feed is not None:
        return feed  # type: ignore[no-any-return]
    made: LiveFeed | None = None
    if isinstance(store, MemoryStore):
        made = MemoryLive()
    elif isinstance(store, SqliteStore):
        from steadyrun.stores._live_sqlite import SqliteLive

        made = SqliteLive(store.path)
    elif type(store).__name__ == "PostgresStore":
        from steadyrun.stores._live_postgres import PostgresLive

        made = PostgresLive(store)  # type: ignore[arg-type]
    if made is not None:
        try:
            store._steadyrun_live = made  # type: ignore[attr-defined]
        except AttributeError:  # a store with slots: no feed rather than a new one per call
            return None
    return made
