"""A real ``steadyrun serve`` on a SQLite file: CLI writes reach it, a SIGKILL is recovered."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from servicekit import AUTH, TOKEN

from steadyrun._cli import main

pytest.importorskip("uvicorn")

HERE = Path(__file__).parent
TTL = 2.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One ``steadyrun serve`` subprocess on the test's SQLite file."""

    def __init__(self, tmp: Path) -> None:
        self.db = tmp / "runs.db"
        self.effects = tmp / "effects.txt"
        self.proc: subprocess.Popen[bytes] | None = None
        self.base = ""
        self.log = tmp / "serve.log"

    def start(self, slow: float = 30.0) -> None:
        port = _free_port()
        env = {
            **os.environ,
            "SERVE_DB": str(self.db),
            "SERVE_EFFECTS": str(self.effects),
            "SERVE_SLOW": str(slow),
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        cmd = [sys.executable, "-m", "steadyrun", "serve", "--app", "serve_app:app"]
        cmd += ["--port", str(port), "--token", TOKEN, "--claim-ttl", str(TTL)]
        cmd += ["--token", "alice:alice-secret"]  # a named token: writes with it are alice's
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, cwd=HERE, stdout=log, stderr=log)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                if httpx.get(f"{self.base}/health", timeout=1).is_success:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def run(self, run_id: str) -> dict[str, object]:
        r = httpx.get(f"{self.base}/runs/{run_id}", headers=AUTH, timeout=5)
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        assert isinstance(data, dict)
        return data

    def started(self, run_id: str, agent: str, text: str) -> None:
        body = {"run_id": run_id, "agent": agent, "input": text}
        r = httpx.post(f"{self.base}/runs", json=body, headers=AUTH, timeout=5)
        assert r.status_code == 202, r.text


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path)
    yield s
    s.stop(signal.SIGKILL)


def _within(seconds: float, check: Callable[[], bool], what: str) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, f"{what} not within {seconds} s"
        time.sleep(0.05)
    return time.monotonic() - start


def _status(serve: Serve, run_id: str, status: str) -> Callable[[], bool]:
    return lambda: serve.run(run_id)["status"] == status


def test_cli_approve_answer_and_cancel_reach_a_running_serve(
    serve: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    serve.start(slow=3.0)
    store = ["--store", f"sqlite:{serve.db}"]
    serve.started("ap", "support", "I was charged twice.")
    serve.started("an", "asker", "Refund please.")
    _within(20, _status(serve, "ap", "suspended"), "ap suspended")
    _within(20, _status(serve, "an", "suspended"), "an suspended")

    assert main(["pending", "ap", *store, "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)[0]
    assert main(["approve", "ap", decision["call_id"], *store]) == 0
    _within(2, _status(serve, "ap", "completed"), "approve took effect")
    capsys.readouterr()

    assert main(["pending", "an", *store, "--json"]) == 0
    wait = json.loads(capsys.readouterr().out)[0]
    assert (
        main(["answer", "an", wait["wait_id"], '{"card": "visa", "amount_cents": 5}', *store]) == 0
    )
    _within(2, _status(serve, "an", "completed"), "answer took effect")

    serve.started("se", "awaiter", "Check with the bank.")
    _within(20, _status(serve, "se", "suspended"), "se suspended")
    capsys.readouterr()
    assert main(["pending", "se", *store, "--json"]) == 0
    awaited = json.loads(capsys.readouterr().out)[0]
    assert awaited["kind"] == "result"
    assert main(["settle", "se", awaited["call_id"], "--result", "no chargeback", *store]) == 0
    _within(2, _status(serve, "se", "completed"), "settle took effect")

    # Cancel a run the serve process executes right now (its tool sleeps 3 s): the executor is
    # fenced out at once, its running body ends and is recorded as it ended, nothing more runs.
    serve.started("ca", "shipper", "Ship it.")
    _within(20, lambda: "start ca" in _read(serve.effects), "ca's tool started")
    assert main(["runs", "cancel", "ca", *store]) == 0
    _within(2, _status(serve, "ca", "cancelled"), "cancel shown")
    time.sleep(TTL + 3.0)  # a second call would have started by now, were the run going on
    assert serve.run("ca")["status"] == "cancelled"
    calls = serve.run("ca")["calls"]
    assert isinstance(calls, list)
    assert [c["status"] for c in calls] == ["succeeded"]  # it finished: not called cancelled
    assert _read(serve.effects).count("start ca") == 1  # the second call never started
    serve.stop()
    assert serve.proc is not None, serve.log.read_text()
    # uvicorn shuts down gracefully (the lifespan stops the worker) and then re-raises SIGTERM.
    assert serve.proc.returncode in (0, -signal.SIGTERM), serve.log.read_text()
    assert "Application shutdown complete" in serve.log.read_text()


def test_a_killed_serve_is_taken_over_after_the_claim_ttl(serve: Serve) -> None:
    serve.start(slow=30.0)
    serve.started("k", "shipper", "Ship it.")
    _within(20, lambda: "start k" in _read(serve.effects), "k's tool started")
    serve.stop(signal.SIGKILL)
    os.environ["SERVE_SLOW"] = "0"
    serve.start(slow=0.0)  # the second call of the run is quick
    took = _within(TTL + 5.0, _status(serve, "k", "completed"), "the run went on by itself")
    assert took <= TTL + 5.0
    calls = serve.run("k")["calls"]
    assert isinstance(calls, list)
    assert [c["status"] for c in calls] == ["needs_review", "succeeded"]
    lines = _read(serve.effects).splitlines()
    assert sum(line.startswith("start k") for line in lines) == 2  # the cut call never again


@pytest.mark.parametrize(("option", "loop"), [([], "uvloop"), (["--loop", "asyncio"], "asyncio")])
def test_a_worker_process_executes_sqlite_runs(
    tmp_path: Path, option: list[str], loop: str
) -> None:
    """``steadyrun worker`` executes a run; on uvloop when it is installed, as ``serve`` does."""
    db = tmp_path / "runs.db"
    env = {
        **os.environ,
        "SERVE_DB": str(db),
        "SERVE_EFFECTS": str(tmp_path / "effects.txt"),
        "SERVE_SLOW": "0",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    import asyncio

    from serve_app import shipper

    from steadyrun.service import Operations
    from steadyrun.stores import SqliteStore

    async def start() -> None:
        async with SqliteStore(db) as store:
            await Operations(store, agents=[shipper]).start("wk", "shipper", "Ship it.")

    asyncio.run(start())
    cmd = [sys.executable, "-m", "steadyrun", "worker", "--app", "serve_app:app"]
    proc = subprocess.Popen(
        [*cmd, "--claim-ttl", "2", "--json", *option], env=env, cwd=HERE, stdout=subprocess.PIPE
    )
    try:

        async def status() -> str:
            async with SqliteStore(db) as store:
                snap = await store.load("wk")
                return snap.run.status if snap is not None else "none"

        _within(30, lambda: asyncio.run(status()) == "completed", "worker completed wk")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    stats = json.loads(out.decode().strip().splitlines()[-1])
    assert stats["executed"] == 1
    assert stats["loop"] == loop


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_serve_tokens_name_who_acts_with_them(tmp_path: Path) -> None:
    serve = Serve(tmp_path)
    serve.start()
    try:
        alice = {"Authorization": "Bearer alice-secret"}
        assert httpx.get(f"{serve.base}/whoami", headers=alice).json() == {"principal": "alice"}
        assert httpx.get(f"{serve.base}/whoami", headers=AUTH).json() == {"principal": "operator"}
    finally:
        serve.stop()
