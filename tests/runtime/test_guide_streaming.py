"""docs/guide.md's streaming example runs as written (issue 21 item 2)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"


def test_the_guide_streaming_example_runs() -> None:
    found = re.search(r"<!-- guide: streaming -->\n```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert found is not None
    out = subprocess.run(
        [sys.executable, "-c", found.group(1)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        "Roses are red, runs are durable.",
        "completed: Roses are red, runs are durable.",
    ]


def test_the_guide_follow_example_runs(tmp_path: Path) -> None:
    found = re.search(r"<!-- guide: follow -->\n```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert found is not None
    program = (
        found.group(1)
        + """
import steadyrun as sr
from steadyrun.testing import ScriptedModel, text

async def main(path):
    agent = sr.Agent(name="a", model=ScriptedModel([text("all done")]))
    store = SqliteStore(path)
    await sr.Runtime(store).run(agent, run_id="r-1", input="go")
    await store.close()
    await watch(path, "r-1")

import sys
asyncio.run(main(sys.argv[1]))
"""
    )
    db = str(tmp_path / "runs.db")
    out = subprocess.run(
        [sys.executable, "-c", program, db], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["completed"]
