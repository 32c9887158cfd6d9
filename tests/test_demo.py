"""The ``steadyrun`` command, its demo, and the quickstart example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import steadyrun
from steadyrun._cli import NO_PROVIDERS, main

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def test_demo_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # --no-color prints no escape codes
    assert "No model configured: using a scripted model (steadyrun.testing.ScriptedModel)" in out
    assert "CRASH" in out
    assert "refund  running" in out  # what the store held after the crash
    assert "send_email  queued" in out
    assert "needs_review" in out
    assert "Do not repeat it before checking" in out  # what the model was told
    assert "refund body for A-1001 executed 1 time" in out
    assert "demo failed" not in out
    assert len(out.splitlines()) <= 60


def test_demo_is_repeatable_in_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    assert main(["demo", "--no-color"]) == 0
    assert capsys.readouterr().out.count("executed 1 time") == 2


def test_demo_console_script() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "steadyrun", "demo"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "executed 1 time" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100


def test_installed_console_script() -> None:
    script = Path(sys.executable).parent / "steadyrun"
    if not script.exists():
        pytest.skip("the steadyrun console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "demo", "--no-color"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_demo_with_model_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "openai:gpt-4.1"]) == 2
    captured = capsys.readouterr()
    assert NO_PROVIDERS in captured.err
    assert "model providers are not installed in this release" in captured.err
    assert captured.out == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"steadyrun {steadyrun.__version__}"


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().err


def test_unknown_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--nope"]) == 2
    assert "--nope" in capsys.readouterr().err


def test_quickstart_example_runs() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: completed" in proc.stdout
    assert "refund" in proc.stdout


def test_demo_reports_a_broken_invariant(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A model that refunds again after the restart: the demo's own checks must catch it.
    from steadyrun._demo import _story
    from steadyrun.testing import ScriptedModel, text, tool_calls

    def careless() -> ScriptedModel:
        args = {"order_id": "A-1001", "amount_cents": 4999, "reason": "again"}
        return ScriptedModel([tool_calls(("refund", args)), text("Refunded.")])

    monkeypatch.setattr(_story, "after_restart_script", careless)
    assert main(["demo", "--no-color"]) == 1
    out = capsys.readouterr().out
    assert "executed 2 times" in out
    assert "demo failed: refund ran once" in out


def test_demo_reports_a_run_that_never_crashed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from steadyrun._demo import _story
    from steadyrun.testing import ScriptedModel, text

    monkeypatch.setattr(_story, "before_crash_script", lambda: ScriptedModel([text("Hello.")]))
    assert main(["demo", "--no-color"]) == 1
    assert "demo failed: crash mid-batch" in capsys.readouterr().out
