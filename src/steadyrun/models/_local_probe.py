"""Can this machine's llama.cpp build compute? Checked in a subprocess before a model loads.

A llama.cpp built with native CPU detection enables every kernel the CPU advertises. On an
Intel CPU with AMX inside a VM whose kernel does not let processes use AMX tiles, the first
matrix multiply then dies with SIGILL, taking the caller's process with it. ``LocalModel``
runs ``PROBE`` first: a child process loads a small model with a tiny context and evaluates a
few tokens; a crash or a failing exit becomes ``LocalBuildError`` with the cause and the
rebuild command. The answer is kept for the rest of the process.

This module does not import ``llama_cpp`` (only the child does), so the check and its tests
work without the extra. ``python -m steadyrun.models._local_probe`` runs the check
(``scripts/install-local`` uses it after installing the extra).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

from steadyrun._errors import LocalBuildError, UsageError

__all__ = [
    "MODEL_DID_NOT_LOAD",
    "PORTABLE_CMAKE_ARGS",
    "PROBE",
    "PROBE_CODE",
    "BuildProbe",
    "build_error",
    "check_build",
    "rebuild_command",
]

PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)
"""The CMake flags of a llama.cpp that runs on any x86-64 CPU with AVX2 (scripts/install-local)."""

MODEL_DID_NOT_LOAD = 3
"""The child's exit status when the model file, not the build, failed: the check is undecided."""

PROBE_CODE = f"""
import sys

import llama_cpp

try:
    llama = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, n_batch=64, verbose=False)
except ValueError as exc:
    print(f"the model did not load: {{exc}}", file=sys.stderr)
    sys.exit({MODEL_DID_NOT_LOAD})
llama.eval(llama.tokenize(b"Hello, world"))
print("llama.cpp computes here")
"""
"""What the child runs, with the model file as ``sys.argv[1]``."""

_TAIL_LINES = 20
_TAIL_CHARS = 2000
_PIN = "0.3.36"  # the local extra's llama-cpp-python, when none is installed to ask


class BuildProbe:
    """Runs ``code`` once in a child Python and remembers whether it passed.

    Args:
        code: The child's source; it gets the model file as ``sys.argv[1]``. A crash (killed by
            a signal) or an exit status other than 0 means the build cannot run; exit status
            ``MODEL_DID_NOT_LOAD`` means the file was at fault, and the check stays undecided.
        python: The interpreter for the child (default: this one).
        timeout: Seconds the child may take.
    """

    def __init__(
        self, code: str = PROBE_CODE, *, python: str | None = None, timeout: float = 300.0
    ) -> None:
        self.code = code
        self.python = python or sys.executable
        self.timeout = timeout
        self._lock = threading.Lock()
        self._decided = False
        self._error: LocalBuildError | None = None

    @property
    def passed(self) -> bool:
        """Whether the check ran and passed (then ``check`` returns at once)."""
        return self._decided and self._error is None

    def check(self, model_path: str | os.PathLike[str]) -> None:
        """Run the check with ``model_path`` unless it already ran; raise if the build cannot run.

        Concurrent callers wait for the one running it.

        Raises:
            LocalBuildError: The child crashed, failed or hung, now or on an earlier call.
        """
        with self._lock:
            if not self._decided:
                self._decided, self._error = self._run(Path(model_path))
            error = self._error
        if error is not None:
            # A fresh instance per raise: callers on other threads each get their own traceback.
            raise LocalBuildError(str(error), error.returncode, error.stderr)

    def _run(self, model_path: Path) -> tuple[bool, LocalBuildError | None]:
        command = [self.python, "-X", "faulthandler", "-c", self.code, str(model_path)]
        try:
            proc = subprocess.run(
                command,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout,
                env=self._env(),
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            stderr = _text(exc.stderr)
            message = (
                f"llama.cpp's check (loading {str(model_path)!r} and evaluating a few tokens in a "
                f"subprocess) did not finish in {self.timeout:g} s"
            )
            return True, LocalBuildError(
                _explain(message, stderr, crashed=False),
                returncode=-9,  # subprocess.run killed it (SIGKILL)
                stderr=stderr,
            )
        if proc.returncode == 0:
            return True, None
        if proc.returncode == MODEL_DID_NOT_LOAD:
            return False, None
        return True, build_error(proc.returncode, proc.stderr, model_path)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.python == sys.executable:
            # The child must import the llama_cpp this process would (a path added at run
            # time, say), so it gets this process's module path.
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return env


def build_error(returncode: int, stderr: str, model_path: Path) -> LocalBuildError:
    """The error for a check that crashed (negative ``returncode``) or exited non-zero."""
    what = f"a tiny computation (loading {str(model_path)!r} and evaluating a few tokens)"
    if returncode < 0:
        message = f"llama.cpp crashed with {_signal_name(-returncode)} in {what}"
    else:
        message = f"llama.cpp failed {what} with exit status {returncode}"
    return LocalBuildError(
        _explain(message, stderr, crashed=returncode < 0), returncode=returncode, stderr=stderr
    )


def rebuild_command(python: str | None = None) -> str:
    """The command that rebuilds the installed llama-cpp-python portably, from source."""
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = _PIN
    return (
        f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" {shlex.quote(python or sys.executable)} -m pip '
        f"install --no-cache-dir --force-reinstall --no-deps llama-cpp-python=={version}"
    )


def _explain(message: str, stderr: str, *, crashed: bool) -> str:
    cause = (
        "this build of llama-cpp-python runs CPU instructions this machine does not allow; "
        "typically a native build's AMX kernels on an Intel CPU that advertises AMX inside a "
        "VM that does not let processes use AMX tiles"
        if crashed
        else "this build of llama-cpp-python cannot run a model here"
    )
    text = (
        f"{message}: {cause}. Rebuild it portably (no native CPU detection, no AMX; "
        f"--no-cache-dir so pip does not reuse the wheel it cached):\n"
        f"  {rebuild_command()}\n"
        "or, in a clone of steadyrun: scripts/install-local .venv/bin/python "
        "(see docs/providers/local.md)"
    )
    tail = _tail(stderr)
    return f"{text}\nThe check's stderr ended with:\n{tail}" if tail else text


def _signal_name(number: int) -> str:
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"signal {number}"
    description = signal.strsignal(sig) or sig.name
    return f"{description} ({sig.name})"


def _tail(stderr: str) -> str:
    lines = stderr.strip().splitlines()[-_TAIL_LINES:]
    return "\n".join(f"  | {line}" for line in lines)[-_TAIL_CHARS:]


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def _probe_model(model_path: Path) -> Path:
    """The file to check with: the packaged model if its package is there (small and known)."""
    from steadyrun.models._local_files import PACKAGED_MODELS, packaged_model_path

    if importlib.util.find_spec(PACKAGED_MODELS["gemma3-270m"].module) is None:
        return model_path
    try:
        return packaged_model_path("gemma3-270m")
    except UsageError:
        return model_path


PROBE = BuildProbe()
"""The check ``LocalModel`` runs (replace it to change the child's code, e.g. in tests)."""


def check_build(model_path: str | os.PathLike[str]) -> None:
    """Check once per process that llama.cpp computes here, with a small model; see ``PROBE``.

    Args:
        model_path: The model about to be loaded; used when no packaged model is installed.

    Raises:
        LocalBuildError: The build cannot run here (the message says why and how to rebuild).
    """
    probe = PROBE
    if probe.passed:
        return  # the usual case after the first model: skip resolving the packaged file
    probe.check(_probe_model(Path(model_path)))


def main() -> int:
    """Run the check with the packaged model; print the outcome (``scripts/install-local``)."""
    from steadyrun.models._local_files import packaged_model_path

    try:
        model = packaged_model_path("gemma3-270m")
    except UsageError as exc:
        print(f"steadyrun: cannot check llama.cpp: {exc}", file=sys.stderr)
        return 1
    try:
        BuildProbe(timeout=PROBE.timeout).check(model)
    except LocalBuildError as exc:
        print(f"steadyrun: {exc}", file=sys.stderr)
        return 1
    print(f"llama.cpp computes here ({model.name} loaded, a few tokens evaluated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
