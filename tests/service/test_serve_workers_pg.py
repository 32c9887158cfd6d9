"""``steadyrun serve`` and ``steadyrun worker`` processes on one PostgreSQL store (issue 17).

- ``serve`` (with its embedded worker) and two ``worker`` processes share 200 runs started and
  approved through the HTTP API: the ledger shows every ship body exactly once, every run
  completes with its answer, and the step log (``store.leases.writers``) says which process
  executed what.
- A ``worker`` SIGKILLed inside a side-effecting tool: a restarted worker takes the run over
  once the claim expired (``--claim-ttl 2``), the cut call is ``needs_review``, no body runs
  twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from pg_app import SLOW_AGENT
from servicekit import AUTH, TOKEN
from worker_child import AGENT, final_text

import pgkit
from steadyrun.records import RunSnapshot
from steadyrun.service import Operations
from steadyrun.stores import PostgresStore
from steadyrun.stores._leases import StepWriter

pytest.importorskip("uvicorn")

pg_dsn = pgkit.database_fixture()

HERE = Path(__file__).parent
RUNS = 200
IN_FLIGHT = 4  # the test's HTTP requests at a time: modest, three servers share 2 cores
SERVE_TTL = 5.0
KILL_TTL = 2.0
DEADLINE = 240.0  # seconds for the 200 runs, far above what they take (about 30 s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Procs:
    """The ``steadyrun`` subprocesses of one test, on one PostgreSQL database."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn = dsn
        self.tmp = tmp
        self.effects = tmp / "ledger.txt"
        self.effects.touch()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _env(self, slow: float) -> dict[str, str]:
        path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
        return {
            **os.environ,
            "SERVE_DSN": self.dsn,
            "SERVE_EFFECTS": str(self.effects),
            "SERVE_SLOW": str(slow),
            "PYTHONPATH": path,
        }

    def spawn(self, name: str, args: list[str], slow: float = 0.0) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "steadyrun", *args, "--app", "pg_app:app"]
        with (self.tmp / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(cmd, env=self._env(slow), cwd=HERE, stdout=log, stderr=log)
        self.procs[name] = proc
        return proc

    def worker(self, name: str, ttl: float, slow: float = 0.0) -> subprocess.Popen[bytes]:
        args = ["worker", "--claim-ttl", str(ttl), "--concurrency", "4", "--json"]
        return self.spawn(name, args, slow)

    def serve(self, ttl: float) -> str:
        port = _free_port()
        args = ["serve", "--port", str(port), "--token", TOKEN, "--claim-ttl", str(ttl)]
        proc = self.spawn("serve", args)
        base = f"http://127.0.0.1:{port}"
        _within(60, lambda: proc.poll() is None and _healthy(base), "serve answering", self)
        return base

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{self.log(name)[-3000:]}" for name in self.procs)

    def stop(self, name: str, sig: int = signal.SIGTERM) -> int:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
        return proc.wait(timeout=60)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def procs(pg_dsn: str, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(pg_dsn, tmp_path)
    yield p
    p.close()


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/health", timeout=1).is_success
    except httpx.HTTPError:
        return False


def _within(seconds: float, check: Callable[[], bool], what: str, procs: Procs) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"{what}: not within {seconds} s\n{procs.logs()}")
        time.sleep(0.05)
    return time.monotonic() - start


def _ledger(procs: Procs) -> list[list[str]]:
    return [line.split() for line in procs.effects.read_text().splitlines()]


async def _store_view(
    dsn: str, run_ids: list[str]
) -> dict[str, tuple[RunSnapshot | None, list[StepWriter]]]:
    """Each run's snapshot and its step log, read by this process."""
    async with PostgresStore(dsn, max_size=2) as store:
        out: dict[str, tuple[RunSnapshot | None, list[StepWriter]]] = {}
        for run_id in run_ids:
            out[run_id] = (await store.load(run_id), await store.leases.writers(run_id))
        return out


def _pid(owner: str) -> int:
    """The process id in an executor id (``host:pid:suffix``)."""
    return int(owner.split(":")[1])


# -- 200 runs through the API, serve + two workers --------------------------------------------


def _approve_all(client: httpx.Client, pool: ThreadPoolExecutor) -> int:
    """Approve every waiting ship call through the API's decide route; how many were approved."""
    listed = client.get("/runs", params={"status": "suspended", "limit": 500})
    assert listed.status_code == 200, listed.text

    def approve(run_id: str) -> int:
        pending = client.get(f"/runs/{run_id}/pending")
        assert pending.status_code == 200, pending.text
        done = 0
        for item in pending.json()["items"]:
            if item["kind"] != "decision":
                continue
            url = f"/runs/{run_id}/calls/{item['call_id']}/decision"
            r = client.post(url, json={"approve": True, "decided_by": "test"})
            # 409: the same decision came first (an earlier round of this loop).
            assert r.status_code in (200, 409), r.text
            done += r.status_code == 200
        return done

    return sum(pool.map(approve, [r["run_id"] for r in listed.json()["runs"]]))


def _work_rows(dsn: str, run_ids: list[str]) -> str:
    """The stuck runs' work rows and last step writers (for a failure's message)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT run_id, wanted, handled, owner, token, expires_us FROM steadyrun.work"
            " WHERE run_id = ANY(%s)",
            (run_ids,),
        ).fetchall()
        log = conn.execute(
            "SELECT run_id, steps, owner, token FROM steadyrun.work_log WHERE run_id = ANY(%s)"
            " ORDER BY row_id",
            (run_ids,),
        ).fetchall()
    return f"work={rows}\nlog={log}"


def _undone(client: httpx.Client, run_ids: list[str]) -> str:
    """What each run not completed shows through the API (for a failure's message)."""
    listed = client.get("/runs", params={"status": "completed", "limit": 500}).json()["runs"]
    done = {r["run_id"] for r in listed}
    lines = []
    for run_id in [r for r in run_ids if r not in done][:5]:
        snap = client.get(f"/runs/{run_id}").json()["data"]
        calls = [(c["id"], c["name"], c["status"]) for c in snap["calls"]]
        pending = client.get(f"/runs/{run_id}/pending").json()["items"]
        lines.append(f"{run_id}: {snap['status']} calls={calls} pending={pending}")
    return "\n".join(lines) + "\n" + _work_rows(DSN[0], [r for r in run_ids if r not in done])


DSN: list[str] = [""]


def test_serve_and_two_workers_execute_every_effect_once(procs: Procs) -> None:
    DSN[0] = procs.dsn
    base = procs.serve(SERVE_TTL)
    workers = [procs.worker(f"worker-{i}", SERVE_TTL) for i in (1, 2)]
    names = {
        procs.procs["serve"].pid: "serve",
        **{w.pid: f"worker-{i}" for i, w in enumerate(workers, 1)},
    }
    began = time.monotonic()
    run_ids = [f"r{i:03d}" for i in range(RUNS)]
    approved = 0
    with (
        httpx.Client(base_url=base, headers=AUTH, timeout=30) as client,
        ThreadPoolExecutor(IN_FLIGHT) as pool,
    ):

        def start(run_id: str) -> None:
            body = {"run_id": run_id, "agent": AGENT, "input": f"please ship {run_id}"}
            r = client.post("/runs", json=body)
            assert r.status_code == 202, r.text

        list(pool.map(start, run_ids))
        started = time.monotonic() - began
        while True:
            approved += _approve_all(client, pool)
            listed = client.get("/runs", params={"status": "completed", "limit": 500})
            if len(listed.json()["runs"]) == RUNS:
                break
            assert all(p.poll() is None for p in procs.procs.values()), procs.logs()
            assert time.monotonic() - began < DEADLINE, (
                f"runs left undone\n{_undone(client, run_ids)}\n{procs.logs()}"
            )
            time.sleep(0.2)
    took = time.monotonic() - began
    stats = {name: procs.stop(name) for name in ("worker-1", "worker-2", "serve")}
    assert stats["worker-1"] == stats["worker-2"] == 0, procs.logs()
    assert stats["serve"] in (0, -signal.SIGTERM), procs.logs()

    # The ledger: every run's ship body ran exactly once, in one of the three processes.
    ledger = _ledger(procs)
    bodies = Counter((run_id, call_id) for _, run_id, call_id, _ in ledger)
    assert max(bodies.values()) == 1, [b for b, n in bodies.items() if n > 1]
    assert sorted(run_id for run_id, _ in bodies) == run_ids
    assert {int(pid) for *_, pid in ledger} <= set(names)

    # The store: every run completed with its answer; its ship call is the ledger's.
    view = asyncio.run(_store_view(procs.dsn, run_ids))
    steps: Counter[str] = Counter()
    runs_by: Counter[str] = Counter()
    shared = 0
    for run_id, (snap, writers) in view.items():
        assert snap is not None
        assert snap.run.status == "completed", (run_id, snap.run.status, snap.run.error)
        assert snap.run.text == final_text(run_id)
        ships = [c for c in snap.calls if c.name == "ship"]
        assert [(c.status, (run_id, c.id) in bodies) for c in ships] == [("succeeded", True)]
        # The step log: one owner per token, tokens never go back, all our processes.
        tokens = [w.token for w in writers]
        assert tokens == sorted(tokens), (run_id, writers)
        assert len({(w.token, w.owner) for w in writers}) == len(set(tokens)), writers
        who = {names[_pid(w.owner)] for w in writers}
        shared += len(who) > 1
        runs_by.update(who)
        steps.update(names[_pid(w.owner)] for w in writers)
    effects_by = Counter(names[int(pid)] for *_, pid in ledger)
    # Executions each worker reports on stop (``--json``); serve's worker does not report.
    executions = {
        n: json.loads(procs.log(n).splitlines()[-1])["executed"] for n in stats if n != "serve"
    }
    assert not any("Traceback" in procs.log(n) for n in procs.procs), procs.logs()
    print(
        f"\nserve + 2 workers on PostgreSQL: {RUNS} runs completed in {took:.1f} s "
        f"(started through the API in {started:.1f} s, {approved} approvals through the API); "
        f"{len(ledger)} effects, each once; effects by process {dict(sorted(effects_by.items()))}; "
        f"steps written by process {dict(sorted(steps.items()))}; runs executed (in part) by "
        f"process {dict(sorted(runs_by.items()))}; {shared} runs executed by two processes; "
        f"executions the workers report {executions}"
    )
    assert approved == RUNS
    assert len(effects_by) >= 2  # the work was shared (the three processes race for it)


# -- a worker killed inside a side effect ------------------------------------------------------


async def _start_slow(dsn: str, run_id: str) -> None:
    from pg_app import slow_shipper

    async with PostgresStore(dsn, max_size=2) as store:
        await Operations(store, agents=[slow_shipper]).start(run_id, SLOW_AGENT, "Ship it.")


async def _status(dsn: str, run_id: str) -> str:
    async with PostgresStore(dsn, min_size=0, max_size=1) as store:
        snap = await store.load(run_id)
        return snap.run.status if snap is not None else "none"


def test_a_killed_worker_is_taken_over_after_the_claim_ttl(procs: Procs) -> None:
    asyncio.run(_start_slow(procs.dsn, "k"))
    first = procs.worker("first", KILL_TTL, slow=30.0)

    def started() -> bool:
        return any(line[:2] == ["start", "k"] for line in _ledger(procs))

    _within(60, started, "the first call's body started", procs)
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    killed = time.monotonic()
    # The second call of the run is quick: a restarted worker completes the run at once.
    second = procs.worker("second", KILL_TTL, slow=0.0)
    took = _within(
        KILL_TTL + 5.0,
        lambda: asyncio.run(_status(procs.dsn, "k")) == "completed",
        "the run went on by itself",
        procs,
    )
    since_kill = time.monotonic() - killed
    assert procs.stop("second") == 0, procs.logs()

    view = asyncio.run(_store_view(procs.dsn, ["k"]))
    snap, writers = view["k"]
    assert snap is not None
    calls = snap.calls
    assert [(c.name, c.status) for c in calls] == [
        ("slow_ship", "needs_review"),
        ("slow_ship", "succeeded"),
    ]
    ledger = _ledger(procs)
    starts = Counter(line[2] for line in ledger if line[0] == "start")
    ends = Counter(line[2] for line in ledger if line[0] == "end")
    assert starts == {calls[0].id: 1, calls[1].id: 1}  # the cut body never ran again
    assert ends == {calls[1].id: 1}
    assert {line[3] for line in ledger if line[2] == calls[0].id} == {str(first.pid)}
    assert {line[3] for line in ledger if line[2] == calls[1].id} == {str(second.pid)}
    # The step log: the killed worker wrote under its token, the second under a newer one.
    owners = [(_pid(w.owner), w.token) for w in writers]
    assert [p for p, _ in owners][0] == first.pid and owners[-1][0] == second.pid, owners
    assert [t for _, t in owners] == sorted(t for _, t in owners)
    print(
        f"\nworker SIGKILLed inside slow_ship on PostgreSQL (--claim-ttl {KILL_TTL:g}): the run "
        f"completed {took:.1f} s after the new worker was started, {since_kill:.1f} s after the "
        f"kill (bound {KILL_TTL + 5:g} s); calls {[c.status for c in calls]}; body starts "
        f"{sum(starts.values())} (the cut call's once)"
    )
