"""scripts/install-local: the one way the project installs the local extra (CI, docs).

It builds llama.cpp portably (no native CPU detection, no AMX), checks that the build can
compute, and rebuilds it from source when it cannot (a wheel pip cached from a native build).
A fake interpreter stands in for Python here: it records what the script asks of it, so the
steps are checked without a 12-minute build.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install-local"

# Records each call as `CMAKE_ARGS|args`; the build check fails as many times as $PROBE_FAILS.
FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "${CMAKE_ARGS:-}|$*" >> "$FAKE_LOG"
if [ "$1 $2" = "-m steadyrun.models._local_probe" ]; then
  n=$(cat "$FAKE_DIR/probes" 2>/dev/null || echo 0)
  echo $((n + 1)) > "$FAKE_DIR/probes"
  if [ "$n" -lt "$PROBE_FAILS" ]; then
    echo "steadyrun: llama.cpp crashed with Illegal instruction (SIGILL)" >&2
    exit 1
  fi
  echo "llama.cpp runs here"
  exit 0
fi
if [ "$1" = "-c" ]; then echo "0.3.36"; fi
exit 0
"""

PORTABLE = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)


def _run(tmp_path: Path, probe_fails: int) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {
        **os.environ,
        "FAKE_LOG": str(log),
        "FAKE_DIR": str(tmp_path),
        "PROBE_FAILS": str(probe_fails),
        "CMAKE_ARGS": "-DGGML_NATIVE=ON",  # a stray setting must not win over the portable one
    }
    proc = subprocess.run(
        [str(SCRIPT), str(python), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls


def _pip_installs(calls: list[str]) -> list[str]:
    return [c for c in calls if "|-m pip install" in c]


def test_it_installs_the_extra_portably_and_checks_the_build(tmp_path: Path) -> None:
    proc, calls = _run(tmp_path, probe_fails=0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (install,) = _pip_installs(calls)
    assert install == f"{PORTABLE}|-m pip install --quiet -e {ROOT}[local]"
    assert calls[-1].endswith("|-m steadyrun.models._local_probe")
    assert "llama.cpp runs here" in proc.stdout


def test_a_build_that_cannot_run_is_rebuilt_from_source_without_the_cached_wheel(
    tmp_path: Path,
) -> None:
    proc, calls = _run(tmp_path, probe_fails=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installs = _pip_installs(calls)
    assert len(installs) == 2
    assert installs[1] == (
        f"{PORTABLE}|-m pip install --quiet --force-reinstall --no-deps "
        "--no-binary llama-cpp-python llama-cpp-python==0.3.36"
    )
    # The bad wheel leaves pip's cache first: the rebuild cannot pick it up, and the portable
    # wheel takes its place there for the next install.
    (removal,) = [c for c in calls if "|-m pip cache remove" in c]
    assert removal.endswith("|-m pip cache remove llama_cpp_python")
    assert calls.index(removal) < calls.index(installs[1])
    probes = [c for c in calls if c.endswith("|-m steadyrun.models._local_probe")]
    assert len(probes) == 2
    assert calls[-1] == probes[-1]
    assert "rebuilding llama-cpp-python" in proc.stdout


def test_a_build_still_broken_after_the_rebuild_fails_clearly(tmp_path: Path) -> None:
    proc, calls = _run(tmp_path, probe_fails=2)
    assert proc.returncode != 0
    assert len(_pip_installs(calls)) == 2
    assert "still cannot run" in proc.stderr
    assert "SIGILL" in proc.stderr
