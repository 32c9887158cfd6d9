"""What one run costs the service's store, counted so it cannot grow silently (issue 20, item 6).

``benchmarks/service.py`` runs many runs through an ``App`` on a SQLite file; it was bound by
the store's one connection thread (every read and commit of every run queued there), not by the
model. ``servicecountkit.count_service`` counts, per run of the same workload (one ``work``
call, then a final text), from ``App.start`` until the run's claim is released: the hops to the
SQLite thread(s), the durable commits, the statements and the whole-run loads. ``BUDGET`` holds
today's figures as upper bounds: lower them with a change that lowers a figure.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

import steadyrun as sr
from servicecountkit import count_service, service_agent
from steadyrun.service import App, create_app
from steadyrun.service._worker import AGENT_META, Worker
from steadyrun.stores import FeedMessage

# Upper bounds per run, measured on the code of 2026-12-01 after issue 20 item 6. Before it
# (the same workload): loads 9, hops 29-33, commits 8, statements 117-121. Hops are the jobs
# handed to the SQLite thread (reads and writes; the worker's looks for runnable runs vary).
BUDGET: dict[str, float] = {
    # 9; 3 on 2026-12-01: start, the worker's resume, and the publisher once at the end, which
    # now marks a run nobody follows stale instead (reloaded when read, as any run not
    # executing here is).
    "loads": 2,
    # 8 until a completed run's final step marked its input consumed (one per commit; the
    # reads use the idle writer's or the reader connection, on the loop); 29; 21-22 before
    # the writer's statements ran on the loop
    "hops": 7,
    "commits": 7,  # 8 until a completed run's final step marked its input consumed (the
    # runtime's ``consume`` after it finds the mark and writes nothing); runs one at a time
    # share no commit, under load they do
    # 8 until the worker's claim and release committed without an fsync of their own
    # (``SqliteThread.write(durable=False)``, 2026-12-06)
    "synced_commits": 5,  # 6 until ``consume`` (the input's delivered mark after the final
    # step) committed unsynced: the final step holds the claimed position durably
    "statements": 69,  # 74 (73.25 measured) while a new run's first input was read twice:
    # by the worker (to find its agent) and again by the run's start (a pending read and a
    # claim of four statements; 68 measured since the start takes the worker's claim);
    # 76 (75.5 measured) before the final step marked the input consumed (73.5 measured);
    # 117; 85 on 2026-12-01; 79 (78-78.25 measured) until each step's
    # write read the run's feed for the loop (79.25 measured): the run's four feed reads
    # (start, batch start, after the batch, answer) are now the start's and the answer's,
    # and one in each of the three running steps' write transactions; 80 until the SQLite
    # step stopped reading what it wrote itself (lease row, previous segment, the settled
    # call's row: 71 measured); 72 until the claim and the release committed unsynced: four
    # ``PRAGMA synchronous`` per run (to NORMAL before each, back to FULL after; no I/O,
    # about 2 us each) for two fsyncs fewer
    # CPU of the service side (issue 20 item 6, 2026-12-06), counted. Deep copies made for
    # observers: the publisher and the live broadcaster read what they are told and keep
    # nothing of a request, a response or a fragment, so they share the runtime's objects;
    # the two tool callbacks too: the publisher copies a call it keeps only for a run
    # somebody follows.
    "observer_copies": 0,  # 14: every callback; 2 while the tool callbacks were copied
    # Snapshot diffs of the publisher: the fragments of a run nobody follows are held, not
    # applied one by one; they are dropped when the execution ends unseen.
    "diffs": 1,  # 10: the start and the end of the execution, and each fragment
    "live_sent": 0,  # nobody follows these runs anywhere
}

# With a follower here of a run that another process executes (the live feed has a
# subscription): the runs executing here, which nobody follows, still send nothing on it.
BUDGET_ELSEWHERE = {"observer_copies": 0, "live_sent": 0}  # 28 and 14: every fragment, encoded

# A run's safe points that must each be durable before what follows them: its first input
# (before ``start`` answers), the step with its call's start, the settled call with the next
# step, and the final step. Fewer synced commits means one of them no longer is.
MIN_COMMITS = 3


async def test_service_run_counts(tmp_path: Path) -> None:
    counted = await count_service(tmp_path / "svc.db", runs=4)
    per = counted.per_run()
    assert per["statements"] > 0, "the SQLite trace counted nothing: is it still wired?"
    assert per["synced_commits"] >= MIN_COMMITS
    over = [f"{k} {per[k]:g} per run > budget {v:g}" for k, v in BUDGET.items() if per[k] > v]
    assert over == [], per


async def test_service_counts_with_a_follower_of_another_run(tmp_path: Path) -> None:
    counted = await count_service(tmp_path / "svc.db", runs=4, elsewhere=True)
    per = counted.per_run()
    over = [f"{k} {per[k]:g} > {v:g}" for k, v in BUDGET_ELSEWHERE.items() if per[k] > v]
    assert over == [], per


async def test_an_observer_of_the_users_still_gets_copies(tmp_path: Path) -> None:
    # The runtime's own observers share what they read; any other gets its own copy (which it
    # may change without changing what the others see: tests/runtime/test_observers.py).
    class Requests(sr.Observer):
        def on_model_request(self, run_id: str, mcid: str, request: sr.ModelRequest) -> None:
            pass

    counted = await count_service(tmp_path / "svc.db", runs=4, observers=[Requests()])
    per = counted.per_run()
    assert per["observer_copies"] == BUDGET["observer_copies"] + 2, per  # two model calls per run


async def test_requests_take_no_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FastAPI runs a plain function (a dependency, an endpoint) in a worker thread: two thread
    # switches per request, and the GIL handed back and forth with the event loop.
    handed: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(fn)
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    store = sr.SqliteStore(tmp_path / "svc.db")
    app = App(store, agents=[service_agent()])
    api = create_app(app, tokens=["t"])
    transport = httpx.ASGITransport(app=api)
    auth = {"Authorization": "Bearer t"}
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://x", headers=auth) as c:
            r = await c.post("/runs", json={"run_id": "r", "agent": "bench", "input": "go"})
            assert r.status_code == 202, r.text
            await app.wait("r")
            assert (await c.get("/runs/r")).json()["data"]["status"] == "completed"
            assert (await c.post("/runs/r/messages", json={"text": "more"})).status_code < 300
            await app.wait("r")
    finally:
        await app.close()
        await store.close()
    assert handed == []


async def test_the_worker_takes_the_claims_of_runs_woken_together_at_once() -> None:
    # Each claim taken is a write (on SQLite, a commit's fsync): taken one after another, the
    # fifth run woken with four others waited for five commits before it began.
    store = sr.MemoryStore()
    for i in range(5):
        meta = {AGENT_META: "bench"}
        await store.append(f"r{i}", FeedMessage(id=f"r{i}:input", content="go", meta=meta))
    leases = store.leases
    taking = most = 0

    class Counted:
        def __getattr__(self, name: str) -> Any:
            return getattr(leases, name)

        async def acquire(self, *args: Any, **kwargs: Any) -> Any:
            nonlocal taking, most
            taking += 1
            most = max(most, taking)
            try:
                await asyncio.sleep(0)  # a store's commit takes a moment
                return await leases.acquire(*args, **kwargs)
            finally:
                taking -= 1

    worker = Worker(sr.Runtime(store, agents=[service_agent()]), Counted(), concurrency=8)
    await asyncio.wait_for(worker.run_until_idle(), 30)
    assert most == 5
    for i in range(5):
        snap = await store.load(f"r{i}")
        assert snap is not None and snap.run.status == "completed"
