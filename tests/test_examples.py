"""The examples run as they are, as a reader would run them."""

from __future__ import annotations

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
