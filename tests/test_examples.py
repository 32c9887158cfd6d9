"""The examples run as they are, as a reader would run them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_approval_flow_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "approval_flow.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "run: suspended" in out.stdout
    assert "waiting: decision on refund" in out.stdout
    assert "refunded $25.00 on A-1001" in out.stdout
    assert out.stdout.rstrip().splitlines()[-1].startswith("run: completed")


# Blocks llama_cpp the way a missing install does: in CI the local extra IS installed in this
# venv, so the example is run with the import made to fail.
WITHOUT_LLAMA_CPP = """
import runpy, sys

class NoLlamaCpp:
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoLlamaCpp())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_the_local_agent_example_without_the_extra_says_how_to_install_it() -> None:
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_LLAMA_CPP, str(EXAMPLES / "local_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "needs the local extra" in out.stderr
    assert "scripts/install-local .venv/bin/python" in out.stderr
    assert "pip install 'steadyrun[local]'" in out.stderr


def test_the_quickstart_example_is_the_readme_snippet() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    section = readme.split("## A first agent", 1)[1].split("\n## ", 1)[0]
    [snippet] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert (EXAMPLES / "quickstart.py").read_text() == snippet
    assert "`examples/quickstart.py` is this program" in section


def test_the_streaming_example_prints_the_words_of_another_process_as_written() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "streaming.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    reads = []
    while chunk := proc.stdout.read1(4096):
        reads.append(chunk.decode())
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    out = "".join(reads)
    answer = "Durable runs keep their work through crashes, and nobody waits for a refresh."
    assert out.splitlines()[-1] == f"completed: {answer}"
    assert out.splitlines()[0].strip() == answer, "the words printed as they came, once"
    assert len(reads) >= 4, "the words came in pieces while the writer wrote them"
