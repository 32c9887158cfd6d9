"""``run_demo`` (for ``steadyrun demo --engine temporal``) tells its story and its checks hold."""

from __future__ import annotations

from pathlib import Path

from steadyrun.temporal._demo import run_demo


async def test_demo_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    assert await run_demo(db=tmp_path / "demo.db", out=lines.append) == 0
    assert "Refunds that really ran: 1" in lines
    assert any(line.startswith("Run completed: ") for line in lines)
