"""The crash tests' child processes: one child run, and a fork server that starts them fast.

A child is ``crash_child.py`` (or another child script with a ``--serve`` mode) on a real
store; SIGKILL ends it for real, so what it left in the store is what a dead process leaves.
``ForkServer`` is the test process's side of the fork server, ``serve`` the child script's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaoskit import CHILD


@dataclass
class Child:
    """A finished child process."""

    returncode: int
    report: dict[str, Any] | None
    stderr: str

    @property
    def killed(self) -> bool:
        """Whether it died by SIGKILL."""
        return self.returncode == -signal.SIGKILL


class ForkServer:
    """``<child> --serve``: forks each child from a process that imported everything.

    A child process is mostly start-up cost (imports); forked children skip it. Each is still
    a process of its own: it opens the store itself, and SIGKILL ends it for real. A request
    may carry ``kill_after`` (seconds), for servers that kill their child that long after
    forking it (``random_child.py``).
    """

    def __init__(self, folder: Path, child: Path = CHILD) -> None:
        self._folder = folder
        self._n = 0
        self._buf = b""
        self.last_pid = 0
        """The pid of the last child this server forked."""
        self._proc = subprocess.Popen(
            [sys.executable, str(child), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )

    def _answer(self, timeout: float) -> dict[str, Any] | None:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the fork server exited with {self._proc.wait()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, argv: list[str], timeout: float = 120, kill_after: float | None = None
    ) -> tuple[int, str, str]:
        """Run one child; its return code, stdout and stderr."""
        assert self._proc.stdin is not None
        self._n += 1
        out = self._folder / f"child-{id(self)}-{self._n}.out"
        request: dict[str, Any] = {"argv": argv, "out": str(out)}
        if kill_after is not None:
            request["kill_after"] = kill_after
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        started = self._answer(30)
        if started is None:
            raise TimeoutError("the fork server does not answer")
        self.last_pid = int(started["pid"])
        ended = self._answer(timeout)
        if ended is None:
            os.kill(started["pid"], signal.SIGKILL)  # the hung child; the server answers for it
            self._answer(30)
            raise TimeoutError(f"child {argv} did not finish in {timeout}s")
        texts = []
        for path in (out, Path(str(out) + ".err")):  # missing if killed right after the fork
            texts.append(path.read_text() if path.exists() else "")
            path.unlink(missing_ok=True)
        return ended["returncode"], texts[0], texts[1]

    def close(self) -> None:
        """Stop the server."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)


def child_app_name(pid: int) -> str:
    """The ``application_name`` of a forked child's PostgreSQL connections (``PGAPPNAME``).

    By it the test finds the backends a killed child left (``pgkit.drain_backends``).
    """
    return f"chaos-child-{pid}"


local = threading.local()
"""A worker thread's ``ForkServer``, as ``local.server``, which ``run_child`` uses."""


def run_child(store: str, mode: str, kill_at: str, effects: Path, timeout: float = 120) -> Child:
    """Run ``crash_child.py`` and collect its report (the last line of its stdout).

    Through this thread's ``ForkServer`` when it has one, else as a new interpreter.
    """
    argv = ["--store", store, "--mode", mode, "--kill-at", kill_at, "--effects", str(effects)]
    server: ForkServer | None = getattr(local, "server", None)
    if server is not None:
        code, out, err = server.run(argv, timeout)
    else:
        proc = subprocess.run(
            [sys.executable, str(CHILD), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    report = None
    lines = out.strip().splitlines()
    if code == 0 and lines:
        report = json.loads(lines[-1])
    return Child(code, report, err)


def serve(main: Callable[[list[str]], Coroutine[Any, Any, None]]) -> None:
    """A child script's ``--serve``: fork one child running ``main`` per request on stdin.

    A request is a JSON line ``{"argv": [...], "out": PATH, "kill_after": S}`` (``kill_after``
    optional); the child writes its stdout to ``PATH`` and its stderr to ``PATH.err``. The
    answers are JSON lines: ``{"pid": N}`` at once, then ``{"returncode": N}`` (negative for a
    signal, as ``subprocess`` reports it). With ``kill_after`` the child is killed with SIGKILL
    that many seconds after the fork unless it exited first (waited on a pidfd). This process
    never starts a thread or an event loop, so every child begins clean, and each child is a
    process of its own that a SIGKILL ends for real.
    """
    with contextlib.suppress(ImportError):
        import steadyrun.stores._postgres  # noqa: F401  (imported once, here)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(main, request["argv"], request["out"])
        print(json.dumps({"pid": pid}), flush=True)
        if request.get("kill_after") is not None:
            fd = os.pidfd_open(pid)
            try:
                if not select.select([fd], [], [], request["kill_after"])[0]:
                    os.kill(pid, signal.SIGKILL)
            finally:
                os.close(fd)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


def _child(
    main: Callable[[list[str]], Coroutine[Any, Any, None]], argv: list[str], out: str
) -> None:
    code = 0
    os.environ["PGAPPNAME"] = child_app_name(os.getpid())
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
        os.dup2(os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
        asyncio.run(main(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
