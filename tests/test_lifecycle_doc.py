"""The examples of docs/lifecycle.md run as they are (each in a directory of its own)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "lifecycle.md"


def _example(section: str) -> str:
    """The first ``python`` block of the ``## section`` of docs/lifecycle.md."""
    text = DOC.read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", body, flags=re.S)
    assert found is not None, f"no python example under '## {section}'"
    return found.group(1)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "History and fork",
            [
                "step 1: running, next model | user: Ship orders 1 to 3.",
                'step 2: running, next batch | assistant: ship{"order": 1}',
                "step 3: running, next model | tool: shipped 1",
                'step 4: running, next batch | assistant: ship{"order": 2}',
                "step 5: running, next model | tool: shipped 2",
                'step 6: running, next batch | assistant: ship{"order": 3}',
                "step 7: running, next model | tool: shipped 3",
                "step 8: completed, next done | assistant: Done: shipped 1, shipped 2, shipped 3.",
                "o-2 suspended",
                "Done: shipped 1, shipped 2, shipped 3.",
                "Done: shipped 1, shipped 9, shipped 3.",
                "o-1 shipped 1",
                "o-1 shipped 2",
                "o-1 shipped 3",
                "o-2 shipped 2",
                "o-2 shipped 3",
                "o-3 shipped 9",
                "o-3 shipped 3",
            ],
        ),
        (
            "Usage budgets",
            [
                "suspended run total_tokens 6600 of 5000",
                "completed - 5 pages.",
                "6 requests, 22200 tokens, $0.0103",
            ],
        ),
        (
            "Agent versions",
            [
                "True",
                "r-1: Told: refunded 500 cents on A-1",
                "r-2: suspended decision m1.c1.v2",
                "r-2: Told: refunded 500 cents on A-1 (no note)",
                "r-3: Told: Call call_1 to refund did not run: the tool refund is no longer "
                "available. Do not call it again; use the tools you have.",
            ],
        ),
        (
            "Retention and deletion",
            [
                "deleted ['t-1']",
                "refused: held by another-executor",
                "retention deleted []",
                "worker retention every 600.0 s",
            ],
        ),
        (
            "Export and import",
            ["imported ['t-1']", "completed - You said: Hi / And again"],
        ),
    ],
)
def test_the_example_runs(section: str, expected: list[str], tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_example(section))
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == expected
