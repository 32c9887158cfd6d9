"""Coverage-guided fuzzing (atheris, libFuzzer) of the parsers of model output, time-bounded.

Each target of ``fuzz_targets`` runs in a process of its own (atheris takes over the process)
with steadyrun's modules instrumented for coverage, starting from a corpus of valid inputs,
for ``STEADYRUN_FUZZ_SECONDS`` seconds in all (default 24, split between the targets). A
finding (an exception that is not the parser's typed refusal) fails the test with the input
that caused it; known, reported parser bugs are passed over and counted
(``fuzz_targets.KNOWN_BUGS``). ``STEADYRUN_FUZZ_SECONDS=0`` skips the fuzzing.

By hand: ``python tests/fuzz/test_atheris.py TARGET [CORPUS_DIR] -max_total_time=60``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fuzz_targets import TARGETS, seeds  # noqa: E402

RUNNER = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import atheris
with atheris.instrument_imports(include=["steadyrun"]):
    import fuzz_targets
fuzz_targets.main()
"""

SECONDS = float(os.environ.get("STEADYRUN_FUZZ_SECONDS", "24"))


def fuzz(
    target: str, corpus: Path, *flags: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run atheris on ``target`` with libFuzzer ``flags``; the finished process."""
    return subprocess.run(
        [sys.executable, "-c", RUNNER, target, str(corpus), *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=corpus.parent,
        check=False,
    )


@pytest.mark.skipif(SECONDS <= 0, reason="STEADYRUN_FUZZ_SECONDS=0")
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_atheris_finds_nothing_new(target: str, tmp_path: Path) -> None:
    pytest.importorskip("atheris", reason="atheris is in the test extra")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, data in enumerate(seeds(target)):
        (corpus / f"seed-{i}").write_bytes(data)
    seconds = max(1, round(SECONDS / len(TARGETS)))
    proc = fuzz(
        target,
        corpus,
        f"-max_total_time={seconds}",
        "-rss_limit_mb=2048",
        "-max_len=4096",
        "-print_final_stats=1",
        timeout=seconds + 120,
    )
    runs = [
        line for line in proc.stderr.splitlines() if line.startswith("stat::number_of_executed")
    ]
    assert proc.returncode == 0, f"atheris found a crash in {target}:\n{proc.stderr[-6000:]}"
    assert runs, proc.stderr[-3000:]
    print(f"{target}: {runs[0].split(':')[-1].strip()} inputs in {seconds}s")


if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, "-c", RUNNER, *sys.argv[1:]])
