"""benchmarks/service_versus.py: service.py on two versions of the library, interleaved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scriptkit import load_script

ROOT = Path(__file__).resolve().parents[2]
versus = load_script(ROOT / "benchmarks" / "service_versus.py", "service_versus")


def test_pairs_alternate_and_the_ratios_are_of_the_medians_and_of_each_pair(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    order: list[Path] = []
    figures = {base: iter([100.0, 90.0, 110.0]), head: iter([280.0, 300.0, 290.0])}

    def fake_run(src: Path, service_args: list[str]) -> dict[str, Any]:
        order.append(src)
        assert service_args == ["--runs", "7"]
        rps = next(figures[src])
        return {"runs_per_s": rps, "cpu_ms_per_run": 1000 / rps}

    monkeypatch.setattr(versus, "one_run", fake_run)
    rec = versus.compare(base, head, 3, ["--runs", "7"])
    assert order == [base, head] * 3  # the base first in each rep
    assert [p["ratio"] for p in rec["pairs"]] == [2.8, round(300 / 90, 3), round(290 / 110, 3)]
    assert rec["base_runs_per_s"] == 100.0 and rec["head_runs_per_s"] == 290.0
    assert rec["ratio_of_medians"] == 2.9
    text = versus.table(rec, "c017a56")
    assert "| 1 |" in text and "×2.90 (issue 20's target: ×3)" in text


def test_the_base_is_the_commits_own_src(tmp_path: Path) -> None:
    src = versus.export_src("HEAD", tmp_path)
    assert (src / "steadyrun" / "__init__.py").read_text() == (
        ROOT / "src" / "steadyrun" / "__init__.py"
    ).read_text()


def test_a_pair_of_real_service_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "service_versus.py"),
            *("--base", "HEAD", "--reps", "1", "--runs", "10", "--json"),
            *("--follow-every", "2", "--model-ms", "5"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rec = json.loads(done.stdout.strip().splitlines()[-1])
    assert rec["base"] == "HEAD" and len(rec["pairs"]) == 1
    assert rec["base_runs_per_s"] > 0 and rec["head_runs_per_s"] > 0
