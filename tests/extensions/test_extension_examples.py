"""The extension examples run as a reader would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("planning_agent.py", "t1 [completed] Check stock of SKU-7 12 left"),
        ("subagents.py", "m2.c1/m1.c1 submit_result succeeded"),
        ("deferred_tools.py", "model call 2 saw tools: churn_report, search_tools"),
        ("media_agent.py", "[pdf tickets/7/invoice.pdf as text] | an invoice: 2 x widgets"),
        ("background_build.py", "answer: The build finished: shop-1.0.tar.gz is ready."),
    ],
)
def test_extension_example_runs(script: str, expected: str) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout
