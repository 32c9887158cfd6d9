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
