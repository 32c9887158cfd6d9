"""The newcomer contract: the README's quick start is two commands, and CI runs the second."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]


def test_quick_start_is_two_commands_demo_then_tests() -> None:
    commands = quick_start()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)
    assert commands[0].endswith("steadyrun demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert quick_start()[1] in [line.strip() for line in ci]
