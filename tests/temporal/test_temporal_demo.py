"""``run_demo`` (for ``steadyrun demo --engine temporal``) tells its story and its checks hold."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from pathlib import Path  # noqa: E402

from steadyrun.temporal._demo import run_demo  # noqa: E402


async def test_demo_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    assert await run_demo(db=tmp_path / "demo.db", out=lines.append) == 0
    assert "Refunds that really ran: 1" in lines
    assert any(line.startswith("Run completed: ") for line in lines)
