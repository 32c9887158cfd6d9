"""The check LocalModel runs before loading a model: can this llama.cpp build compute at all?

A native build of llama.cpp can carry kernels the machine cannot run (AMX on a VM that does not
let processes use AMX tiles): the first matrix multiply then kills the process with SIGILL. The
check runs a tiny computation in a subprocess first, so the caller gets a LocalBuildError
naming the cause and the rebuild command instead of a dead process.

The child's code is injectable: these tests simulate a broken build without llama.cpp, so they
run in the plain test command. The last test, marked local_model, runs the real check.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from steadyrun._errors import ModelError
from steadyrun.models import LocalBuildError
from steadyrun.models._local_probe import MODEL_DID_NOT_LOAD, BuildProbe

SIGILL = "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n"


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


def _counting(log: Path, then: str = "") -> str:
    """Child code that records each run in ``log`` (one line per run), then does ``then``."""
    return f"with open({str(log)!r}, 'a') as f:\n    f.write('run\\n')\n{then}"


def test_a_build_that_dies_of_sigill_raises_a_typed_error_naming_the_cause(
    model_file: Path,
) -> None:
    probe = BuildProbe(code=SIGILL)
    with pytest.raises(LocalBuildError) as caught:
        probe.check(model_file)
    error = caught.value
    assert isinstance(error, ModelError)
    assert error.returncode < 0
    text = str(error)
    assert "Illegal instruction (SIGILL)" in text
    assert "AMX" in text
    # The rebuild command: portable flags, and no reuse of the wheel pip cached.
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF' in text
    assert "-DGGML_AMX_TILE=OFF" in text
    assert "pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python==" in text
    assert "scripts/install-local" in text


def test_the_error_survives_pickling(model_file: Path) -> None:
    # Errors cross process boundaries (workers, Temporal activities) pickled.
    with pytest.raises(LocalBuildError) as caught:
        BuildProbe(code=SIGILL).check(model_file)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (str(copy), copy.returncode, copy.stderr) == (
        str(caught.value),
        caught.value.returncode,
        caught.value.stderr,
    )


def test_a_failing_exit_names_the_status_and_the_end_of_stderr(model_file: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        for i in range(200):
            print(f"line {i}", file=sys.stderr)
        sys.exit(7)
        """
    )
    with pytest.raises(LocalBuildError) as caught:
        BuildProbe(code=code).check(model_file)
    text = str(caught.value)
    assert "exit status 7" in text
    assert "line 199" in text  # the tail is shown...
    assert "line 0\n" not in text  # ...not the whole of it
    assert caught.value.returncode == 7
    assert "line 199" in caught.value.stderr


def test_the_child_gets_the_model_file_and_a_success_passes(
    model_file: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    code = f"import sys\nopen({str(seen)!r}, 'w').write(sys.argv[1])\n"
    BuildProbe(code=code).check(model_file)
    assert seen.read_text() == str(model_file)


def test_the_check_runs_once_and_remembers_its_answer(model_file: Path, tmp_path: Path) -> None:
    passing = tmp_path / "passing.log"
    probe = BuildProbe(code=_counting(passing))
    for _ in range(3):
        probe.check(model_file)
    assert passing.read_text() == "run\n"

    failing = tmp_path / "failing.log"
    broken = BuildProbe(code=_counting(failing, SIGILL))
    for _ in range(2):
        with pytest.raises(LocalBuildError, match="SIGILL"):
            broken.check(model_file)
    assert failing.read_text() == "run\n"


def test_a_model_that_does_not_load_is_not_blamed_on_the_build(
    model_file: Path, tmp_path: Path
) -> None:
    # The file is at fault, not the build: LocalModel's own load reports it (UsageError); the
    # check stays undecided and runs again with the next model.
    log = tmp_path / "runs.log"
    probe = BuildProbe(code=_counting(log, f"import sys\nsys.exit({MODEL_DID_NOT_LOAD})\n"))
    probe.check(model_file)
    probe.check(model_file)
    assert log.read_text() == "run\nrun\n"


def test_a_hung_check_is_an_error_too(model_file: Path) -> None:
    probe = BuildProbe(code="import time\ntime.sleep(30)\n", timeout=1.0)
    with pytest.raises(LocalBuildError, match="did not finish in 1 s"):
        probe.check(model_file)


LOCAL_MODEL_WITH_A_BROKEN_BUILD = """
import asyncio, sys, types

# A stand-in for llama_cpp: LocalModel imports it, and must not construct a Llama when the
# build check fails.
stub = types.ModuleType("llama_cpp")
class Llama:
    def __init__(self, **kwargs):
        print("Llama constructed")
    def create_chat_completion(self, messages, tools=None, stream=False, seed=None):
        raise AssertionError("not reached")
stub.Llama = Llama
sys.modules["llama_cpp"] = stub

from steadyrun.chat import Message, ModelRequest, TextPart
from steadyrun.models import LocalBuildError, _local_probe
from steadyrun.models.local import LocalModel

_local_probe.PROBE = _local_probe.BuildProbe(code=%(code)r)
model = LocalModel(model_path=sys.argv[1])
request = ModelRequest(messages=[Message(role="user", parts=[TextPart(text="hi")])])
for step in (model.load(), model.respond(request)):
    try:
        asyncio.run(step)
    except LocalBuildError as exc:
        print("LocalBuildError:", str(exc).splitlines()[0])
model.close()
"""


def test_local_model_checks_the_build_before_it_loads_the_model(model_file: Path) -> None:
    # In a subprocess with a stub llama_cpp: the real one may or may not be installed here.
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            LOCAL_MODEL_WITH_A_BROKEN_BUILD % {"code": SIGILL},
            str(model_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    for line in lines:  # load and respond both raise it, and no Llama was constructed
        assert line.startswith("LocalBuildError: llama.cpp crashed with Illegal instruction")


@pytest.mark.local_model
def test_the_real_check_passes_with_the_installed_build() -> None:
    from e2e.local_support import require_llama

    require_llama()
    from steadyrun.models.local import packaged_model_path

    BuildProbe().check(packaged_model_path())
