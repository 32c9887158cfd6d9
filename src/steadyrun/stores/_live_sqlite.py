"""``SqliteLive``: the live feed of a SQLite file, over Unix sockets beside it.

Every process that follows a run of the file listens on one Unix socket in a directory named
after the file (in the temporary directory: socket paths are short); an owner connects to each
socket there once and writes its messages as lines. Writing never waits: the messages for a
follower that does not read pile up in its connection's buffer only up to a bound, past which
they are dropped and the follower sees the gap in the numbering (and reloads the run). A socket
whose process died refuses the connection and is removed by the owner. So a follower learns of
a fragment or a save as soon as it is made, and no process polls the file for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from steadyrun.stores._live import Cached, LiveHub, LiveSubscription, Sender, decode_frame

__all__ = ["SqliteLive", "live_directory"]

log = logging.getLogger("steadyrun.live")

_BACKLOG = 256 * 1024
"""Bytes waiting for one follower beyond which its messages are dropped (it sees a gap)."""


def live_directory(path: Path) -> Path:
    """Where the followers of the SQLite file at ``path`` listen."""
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"steadyrun-live-{key}"


class SqliteLive:
    """The live feed of a SQLite store (see the module).

    Args:
        path: The store's file.
    """

    def __init__(self, path: Path) -> None:
        self.dir = live_directory(path)
        self.hub = LiveHub()
        self._sender = Sender(self.hub.token)
        self._name = f"{os.getpid()}-{self.hub.token}"
        self._names: list[str] = []
        self._others = Cached(self._look, 0.5)
        self._out: dict[str, asyncio.StreamWriter] = {}
        self._server: asyncio.Server | None = None
        self._readers: set[asyncio.StreamWriter] = set()

    def followed(self) -> bool:
        """Whether a follower of this file may be listening (a socket in the directory)."""
        return len(self.hub) > 0 or self._others()

    def follows(self, run_id: str) -> bool:
        """Whether ``run_id`` is followed here, or another process's follower may listen."""
        return self.hub.watched(run_id) or self._others()

    def _look(self) -> bool:
        try:
            self._names = [n for n in os.listdir(self.dir) if n != self._name]
        except FileNotFoundError:
            self._names = []
        return bool(self._names)

    async def publish(self, message: dict[str, Any]) -> None:
        """Send to every listening process (this one too, directly)."""
        frames = self._sender.frames(message)
        self.hub.deliver_own(str(message["run"]), frames)
        if not self._others():
            return
        data = b"".join(frame + b"\n" for frame in frames)
        for name in list(self._names):
            writer = self._out.get(name)
            if writer is None or writer.is_closing():
                writer = await self._connect(name)
                if writer is None:
                    continue
            if writer.transport.get_write_buffer_size() > _BACKLOG:
                continue  # that follower is behind: it sees the gap in the numbering
            writer.write(data)

    async def _connect(self, name: str) -> asyncio.StreamWriter | None:
        target = self.dir / name
        try:
            _, writer = await asyncio.open_unix_connection(str(target))
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(OSError):
                os.unlink(target)  # its process is gone
            with contextlib.suppress(ValueError):
                self._names.remove(name)
            return None
        except OSError as exc:
            log.debug("live follower %s not reached: %s", target, exc)
            return None
        self._out[name] = writer
        return writer

    async def subscribe(self, run_id: str, *, limit: int = 1000) -> LiveSubscription:
        """Start receiving ``run_id``'s messages (listens on first use)."""
        if self._server is None:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._server = await asyncio.start_unix_server(self._serve, str(self.dir / self._name))
        return self.hub.subscribe(run_id, limit)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._readers.add(writer)
        try:
            while line := await reader.readline():
                message = decode_frame(line)
                if message is not None:
                    self.hub.deliver(message)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the owner went away (or wrote a line past the limit): gaps tell the rest
        finally:
            writer.close()
            self._readers.discard(writer)

    async def close(self) -> None:
        """Stop listening (the socket file goes) and close the connections to followers."""
        if self._server is not None:
            server, self._server = self._server, None
            server.close()
            for reader in list(self._readers):
                reader.close()  # its readline ends: the connection's task returns
            with contextlib.suppress(OSError):
                os.unlink(self.dir / self._name)
        for writer in self._out.values():
            writer.close()
        self._out.clear()
