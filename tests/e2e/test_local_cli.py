"""The local model from the outside: the example and ``steadyrun demo --model local:...``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.local_support import require_llama

pytestmark = pytest.mark.local_model

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def test_the_local_agent_example_runs() -> None:
    require_llama()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "local_agent.py")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("call: get_weather({")
    assert "-> succeeded" in lines[0]
    assert lines[1].startswith("answer: ")
    assert lines[2].startswith("status: completed; 2 model calls")


def test_the_demo_runs_with_the_local_model() -> None:
    require_llama()
    proc = subprocess.run(
        [sys.executable, "-m", "steadyrun", "demo", "--no-color", "--model", "local:gemma3-270m"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(),
        timeout=1200,
    )
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Model: local:gemma3-270m, a real model" in proc.stdout
    assert "No model configured" not in proc.stdout
    assert "checks" in proc.stdout
    assert "demo failed" not in proc.stdout
