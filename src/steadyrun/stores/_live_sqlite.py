"""``SqliteLive``: the live feed of a SQLite file, over datagram sockets beside it.

Every process that follows a run of the file binds one Unix datagram socket in a directory
named after the file (in the temporary directory: socket paths are short); an owner sends each
message to every socket there. Sending never waits: a follower whose socket buffer is full
misses the message and sees the gap in the numbering. A socket whose process died refuses the
datagram and is removed by the sender. So a follower learns of a fragment or a save as soon as
it is made, and no process polls the file for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from steadyrun.stores._live import (
    Cached,
    LiveHub,
    LiveSubscription,
    Sender,
    decode_frame,
)

__all__ = ["SqliteLive", "live_directory"]

log = logging.getLogger("steadyrun.live")

_BUFFER = 1 << 20


def live_directory(path: Path) -> Path:
    """Where the followers of the SQLite file at ``path`` bind their sockets."""
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
        self._out: socket.socket | None = None
        self._in: socket.socket | None = None
        self._name = f"{os.getpid()}-{self.hub.token}"
        self._others = Cached(self._any_other, 0.5)

    def followed(self) -> bool:
        """Whether a follower of this file may be listening (a socket in the directory)."""
        return len(self.hub) > 0 or self._others()

    def _any_other(self) -> bool:
        try:
            return any(name != self._name for name in os.listdir(self.dir))
        except FileNotFoundError:
            return False

    async def publish(self, message: dict[str, Any]) -> None:
        """Send to every listening process (this one too, directly)."""
        frames = self._sender.frames(message)
        if len(self.hub):
            for frame in frames:
                decoded = decode_frame(frame)
                if decoded is not None:
                    self.hub.deliver({**decoded, "local": True})
        if not self._others():
            return
        try:
            names = [n for n in os.listdir(self.dir) if n != self._name]
        except FileNotFoundError:
            return
        out = self._socket()
        for name in names:
            target = str(self.dir / name)
            for frame in frames:
                try:
                    out.sendto(frame, target)
                except BlockingIOError:
                    continue  # that follower is behind: it sees the gap in the numbering
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(target)  # its process is gone
                    break
                except OSError as exc:
                    log.debug("live message to %s not sent: %s", target, exc)
                    break

    def _socket(self) -> socket.socket:
        if self._out is None:
            out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            out.setblocking(False)
            self._out = out
        return self._out

    async def subscribe(self, run_id: str, *, limit: int = 1000) -> LiveSubscription:
        """Start receiving ``run_id``'s messages (binds this process's socket on first use)."""
        if self._in is None:
            self._listen()
        return self.hub.subscribe(run_id, limit)

    def _listen(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
        sock.bind(str(self.dir / self._name))
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable)
        self._in = sock
        self._loop = asyncio.get_running_loop()

    def _readable(self) -> None:
        sock = self._in
        if sock is None:
            return
        while True:
            try:
                raw = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            message = decode_frame(raw)
            if message is not None:
                self.hub.deliver(message)

    async def close(self) -> None:
        """Unbind this process's socket and stop sending."""
        if self._in is not None:
            sock, self._in = self._in, None
            with contextlib.suppress(Exception):
                self._loop.remove_reader(sock.fileno())
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(self.dir / self._name)
        if self._out is not None:
            self._out.close()
            self._out = None
