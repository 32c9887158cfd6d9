"""The newcomer contract: the README's quick start is two commands, CI runs the second, and
every Python snippet of the README runs as it is (and does what the README says of it)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from steadyrun.stores import SqliteStore

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


# -- every snippet of the README is run ----------------------------------------------------------


def fenced_blocks() -> list[tuple[str, str]]:
    """Every fenced block of the README: (language, text)."""
    readme = (ROOT / "README.md").read_text()
    return re.findall(r"^```(\w*)\n(.*?)^```", readme, flags=re.S | re.M)


def python_snippets() -> list[str]:
    return [text for language, text in fenced_blocks() if language == "python"]


def test_every_readme_block_is_run_by_a_test() -> None:
    # bash: the quick start's two commands (the demo: tests/test_demo.py; the tests: CI);
    # python: run below. A block of another kind would have no test: add one with it.
    kinds = [language for language, _ in fenced_blocks()]
    assert kinds.count("bash") == len(quick_start()) == 2
    assert set(kinds) == {"bash", "python"}


def _run(snippet: Path, folder: Path) -> str:
    out = subprocess.run(
        [sys.executable, str(snippet)], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


async def _refunds(db: Path) -> tuple[str, int]:
    async with SqliteStore(db) as store:
        snap = await store.load("ticket-4711")
    assert snap is not None
    return snap.run.status, sum(c.name == "refund" for c in snap.calls)


@pytest.mark.parametrize("index", range(len(python_snippets())))
def test_each_python_snippet_runs(index: int, tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(python_snippets()[index])
    assert "status: completed" in _run(snippet, tmp_path)


def test_the_first_agent_run_twice_refunds_once_thanks_to_its_input_id(tmp_path: Path) -> None:
    [first_agent] = [s for s in python_snippets() if 'SqliteStore("runs.db")' in s]
    snippet = tmp_path / "snippet.py"
    snippet.write_text(first_agent)
    once = _run(snippet, tmp_path)
    assert "refund(" in once and "status: completed" in once
    assert _run(snippet, tmp_path) == once  # the stored run, as it was
    assert asyncio.run(_refunds(tmp_path / "runs.db")) == ("completed", 1)


def test_without_its_input_id_a_second_run_is_a_new_turn_that_refunds_again(
    tmp_path: Path,
) -> None:
    # What the README says happens without input_id: rerunning adds a turn.
    [first_agent] = [s for s in python_snippets() if 'SqliteStore("runs.db")' in s]
    lines = first_agent.splitlines(keepends=True)
    without = "".join(line for line in lines if "input_id=" not in line)
    assert without != first_agent
    snippet = tmp_path / "snippet.py"
    snippet.write_text(without)
    _run(snippet, tmp_path)
    _run(snippet, tmp_path)
    assert asyncio.run(_refunds(tmp_path / "runs.db")) == ("completed", 2)
