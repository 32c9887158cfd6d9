"""The service's ``App`` on the Temporal engine: the same routes and errors as on the built-in one.

The HTTP API of an ``App(store, engine=TemporalEngine(...))`` starts runs as workflows (with
an embedded Temporal worker here), decides, cancels and continues them through the workflow,
and reads them from the store the workflow records to.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")
pytest.importorskip("fastapi", reason="the service extra is not installed")

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
from temporal_kit import Deps as KitDeps  # noqa: E402
from temporal_kit import agents as kit_agents  # noqa: E402
from temporal_parity_kit import Deps, marks, parity_agents  # noqa: E402
from temporalio.client import WorkflowExecutionStatus  # noqa: E402
from temporalio.service import RPCError  # noqa: E402
from test_temporal_engine import connect, eventually  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.service import App, Operations, create_app  # noqa: E402
from steadyrun.stream import RunStatusChanged  # noqa: E402
from steadyrun.temporal import TemporalEngine  # noqa: E402

AUTH = {"Authorization": "Bearer t0k"}


@dataclass
class Host:
    app: App
    http: httpx.AsyncClient
    effects: Path
    target: str = ""
    queue: str = ""
    db: Path = Path()

    async def cli(self, *args: str) -> tuple[int, str]:
        """A ``steadyrun`` command on the store, reaching Temporal at the session's server."""
        env = {
            **os.environ,
            "STEADYRUN_TEMPORAL_ADDRESS": self.target,
            "STEADYRUN_TASK_QUEUE": self.queue,
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "steadyrun", *args, "--store", f"sqlite:{self.db}",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await proc.communicate()
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    async def status(self, run_id: str) -> str:
        got = await self.http.get(f"/runs/{run_id}", headers=AUTH)
        assert got.status_code == 200, got.text
        return str(got.json()["data"]["status"])

    async def until(self, run_id: str, status: str) -> None:
        await eventually(lambda: self.status(run_id), lambda s: s == status)

    async def pending(self, run_id: str) -> list[dict[str, Any]]:
        got = await self.http.get(f"/runs/{run_id}/pending", headers=AUTH)
        if got.status_code == 404:
            return []  # started, not recorded yet
        assert got.status_code == 200, got.text
        return list(got.json()["items"])


@pytest.fixture
async def host(temporal_server: Any, tmp_path: Path) -> AsyncIterator[Host]:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    deps = Deps(effects=tmp_path / "fx")
    store_path = tmp_path / "runs.db"
    store = sr.SqliteStore(store_path)
    engine = TemporalEngine(client, task_queue=queue, worker=True)
    more = kit_agents(KitDeps(effects=tmp_path / "kit-fx"))
    app = App(store, agents=[*parity_agents(deps), *more], engine=engine)
    api = create_app(app, tokens={"t0k": "alice"}, stream_poll_seconds=0.2)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        try:
            yield Host(app, http, deps.effects, temporal_server.target, queue, store_path)
        finally:
            await app.close()
            await store.close()


async def test_start_is_idempotent_and_a_different_request_conflicts(host: Host) -> None:
    body = {"agent": "chat", "input": "Hello.", "run_id": "c-1"}
    first = await host.http.post("/runs", json=body, headers=AUTH)
    assert first.status_code == 202, first.text
    assert first.json()["created"] is True
    await host.until("c-1", "completed")
    again = await host.http.post("/runs", json=body, headers=AUTH)
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["status"] == "completed"
    other = await host.http.post("/runs", json={**body, "input": "Other."}, headers=AUTH)
    assert other.status_code == 409, other.text
    assert [w for w, _ in marks(host.effects)] == ["chat1"]  # the repeat started nothing


async def test_approve_with_post_decide_runs_the_call_once(host: Host) -> None:
    started = await host.http.post(
        "/runs", json={"agent": "wire", "input": "Wire 20.", "run_id": "w-1"}, headers=AUTH
    )
    assert started.status_code == 202, started.text
    (item,) = await eventually(lambda: host.pending("w-1"), lambda p: len(p) == 1)
    assert item["kind"] == "decision"
    path = f"/runs/w-1/calls/{item['call_id']}/decision"
    decided = await host.http.post(path, json={"approve": True}, headers=AUTH)
    assert decided.status_code == 200, decided.text
    assert decided.json()["decision"]["decided_by"] == "alice", decided.json()
    await host.until("w-1", "completed")
    again = await host.http.post(path, json={"approve": True}, headers=AUTH)
    assert again.status_code in (200, 409), again.text
    assert [w for w, _ in marks(host.effects)] == ["wire20"]


async def test_cancel_then_the_same_errors_as_the_builtin_engine(host: Host) -> None:
    await host.http.post(
        "/runs", json={"agent": "wire", "input": "Wire 30.", "run_id": "w-2"}, headers=AUTH
    )
    (item,) = await eventually(lambda: host.pending("w-2"), lambda p: len(p) == 1)
    cancelled = await host.http.post("/runs/w-2/cancel", headers=AUTH)
    assert cancelled.status_code == 200, cancelled.text
    out = cancelled.json()
    assert out["runs"] == ["w-2"] and out["calls"] == [f"w-2:{item['call_id']}"]
    assert await host.status("w-2") == "cancelled"
    repeat = await host.http.post("/runs/w-2/cancel", headers=AUTH)
    assert repeat.status_code == 200 and repeat.json()["runs"] == ["w-2"]
    path = f"/runs/w-2/calls/{item['call_id']}/decision"
    late = await host.http.post(path, json={"approve": True}, headers=AUTH)
    # Its call was cancelled: it waits for no decision (tests/engines/test_refusals.py).
    assert late.status_code == 409 and late.json()["error"] == "not_pending", late.text
    resumed = await host.http.post("/runs/w-2/resume", headers=AUTH)
    assert resumed.status_code == 409, resumed.text
    missing = await host.http.post("/runs/nope/cancel", headers=AUTH)
    assert missing.status_code == 404, missing.text
    assert marks(host.effects) == []


async def test_a_completed_run_takes_new_input_as_a_new_turn(host: Host) -> None:
    await host.http.post(
        "/runs", json={"agent": "chat", "input": "Hello.", "run_id": "c-2"}, headers=AUTH
    )
    await host.until("c-2", "completed")
    done = await host.http.post("/runs/c-2/cancel", headers=AUTH)
    assert done.status_code == 409, done.text  # nothing to cancel
    sent = await host.http.post(
        "/runs/c-2/messages", json={"text": "And again.", "id": "m-1"}, headers=AUTH
    )
    assert sent.status_code == 202, sent.text
    assert sent.json()["by"] == "alice"

    async def texts() -> list[str]:
        got = await host.http.get("/runs/c-2", headers=AUTH)
        snap = got.json()["data"]
        done = snap["status"] == "completed"
        return [b.get("text") or "" for b in snap["blocks"]] if done else []

    blocks = await eventually(texts, lambda t: any("turn 2: And again." in x for x in t))
    assert any("turn 1: Hello." in x for x in blocks)


async def test_operations_continue_a_completed_run_once(host: Host) -> None:
    app = host.app
    await app.start("c-3", "chat", "Hello.")
    await host.until("c-3", "completed")
    ops = Operations(app.runtime, engine=app.engine)
    started = await ops.continue_run("c-3", "c-3b", "Next.")
    assert started.created is True
    await host.until("c-3b", "completed")
    with pytest.raises(sr.ConflictError):
        await ops.continue_run("c-3", "c-3c", "Next.")
    history = await app.history("c-3b")
    said = [m.text for s in history for m in s.messages if m.role == "assistant"]
    assert said and said[-1] == "turn 2: Next."


async def test_the_display_stream_shows_each_step_as_the_workflow_records_it(host: Host) -> None:
    # The follower does not poll (30 s): the record activity's notes on the store's live feed
    # are what makes it reload the run after each recorded step.
    await host.http.post(
        "/runs", json={"agent": "wire", "input": "Wire 40.", "run_id": "w-3"}, headers=AUTH
    )
    (item,) = await eventually(lambda: host.pending("w-3"), lambda p: len(p) == 1)
    statuses: list[str] = []
    async with asyncio.timeout(30):
        async for event in host.app.publisher.follow("w-3", poll_interval=30.0):
            if event.kind == "snapshot":
                assert event.snapshot is not None
                statuses.append(event.snapshot.status)
                path = f"/runs/w-3/calls/{item['call_id']}/decision"
                out = await host.http.post(path, json={"approve": True}, headers=AUTH)
                assert out.status_code == 200, out.text
            elif isinstance(event.delta, RunStatusChanged):
                statuses.append(event.delta.status)
                if event.delta.status == "completed":
                    break
    assert statuses[-1] == "completed", statuses


async def test_a_fork_goes_on_in_a_workflow_of_its_own(host: Host) -> None:
    await host.http.post(
        "/runs", json={"agent": "chat", "input": "Hello.", "run_id": "c-4"}, headers=AUTH
    )
    await host.until("c-4", "completed")
    steps = (await host.http.get("/runs/c-4/history", headers=AUTH)).json()["steps"]
    first = next(s["step"] for s in steps if any(m["role"] == "user" for m in s["messages"]))
    body = {"at": first, "new_run_id": "c-4b", "edit": {"text": "Goodbye."}}
    forked = await host.http.post("/runs/c-4/fork", json=body, headers=AUTH)
    assert forked.status_code == 202, forked.text
    await host.until("c-4b", "completed")
    shown = (await host.http.get("/runs/c-4b", headers=AUTH)).json()["data"]
    assert shown["text"] == "turn 1: Goodbye.", shown
    again = await host.http.post("/runs/c-4/fork", json=body, headers=AUTH)
    assert again.status_code == 200, again.text


async def test_who_settled_and_who_decided_are_recorded(host: Host) -> None:
    await host.http.post(
        "/runs", json={"agent": "support", "input": "Charged twice.", "run_id": "s-1"}, headers=AUTH
    )
    items = await eventually(lambda: host.pending("s-1"), lambda p: len(p) == 2)
    kinds = {i["kind"]: i for i in items}
    settle = f"/runs/s-1/calls/{kinds['result']['call_id']}/settle"
    settled = await host.http.post(settle, json={"result": "no chargeback"}, headers=AUTH)
    assert settled.status_code == 200, settled.text
    assert settled.json()["settled_by"] == "alice"
    decide = f"/runs/s-1/calls/{kinds['decision']['call_id']}/decision"
    decided = await host.http.post(decide, json={"approve": True}, headers=AUTH)
    assert decided.status_code == 200, decided.text
    await host.until("s-1", "completed")
    calls = (await host.http.get("/runs/s-1", headers=AUTH)).json()["data"]["calls"]
    assert {c["status"] for c in calls} == {"succeeded"}


async def test_a_cancel_records_who_cancelled(host: Host) -> None:
    await host.http.post(
        "/runs", json={"agent": "wire", "input": "Wire 50.", "run_id": "w-5"}, headers=AUTH
    )
    (item,) = await eventually(lambda: host.pending("w-5"), lambda p: len(p) == 1)
    cancelled = await host.http.post("/runs/w-5/cancel", headers=AUTH)
    assert cancelled.status_code == 200, cancelled.text
    snap = await host.app.store.load("w-5")
    assert snap is not None and snap.run.cancelled_by == "alice"
    (call,) = [c for c in snap.calls if c.id == item["call_id"]]
    assert call.status == "cancelled" and call.error is not None and "by alice" in call.error
    shown = (await host.http.get("/runs/w-5", headers=AUTH)).json()["data"]
    assert shown["cancelled_by"] == "alice", shown


async def test_delete_an_ended_run_and_its_workflow_then_start_the_id_again(host: Host) -> None:
    app = host.app
    await app.start("c-6", "chat", "Hello.")
    await host.until("c-6", "completed")
    exported = await Operations(app.runtime, engine=app.engine).export_run("c-6")
    assert [r["run"]["run_id"] for r in exported["runs"]] == ["c-6"]
    deleted = await Operations(app.runtime, engine=app.engine).delete("c-6")
    assert deleted.runs == ["c-6"] and deleted.found
    assert await app.store.load("c-6") is None
    again = await Operations(app.runtime, engine=app.engine).delete("c-6")
    assert not again.found
    # The id is free again, as on the built-in engine: a new run starts under it.
    started = await app.start("c-6", "chat", "Hello again.")
    assert started.created is True
    await host.until("c-6", "completed")


async def test_delete_a_waiting_run_terminates_its_workflow(host: Host) -> None:
    app = host.app
    await app.start("w-6", "wire", "Wire 60.")
    await eventually(lambda: host.pending("w-6"), lambda p: len(p) == 1)
    deleted = await Operations(app.runtime, engine=app.engine).delete("w-6")
    assert deleted.runs == ["w-6"]
    assert await app.store.load("w-6") is None
    runs = await app.engine.runs()  # type: ignore[attr-defined]
    try:
        desc = await runs.client.get_workflow_handle("w-6").describe()
        assert desc.status != WorkflowExecutionStatus.RUNNING
    except RPCError:
        pass  # its history is gone already
    assert marks(host.effects) == []


async def test_delete_a_running_run_is_refused_as_busy(host: Host) -> None:
    app = host.app
    await app.start("w-7", "wire", "Wire 70.")
    await eventually(lambda: host.pending("w-7"), lambda p: len(p) == 1)
    snap = await app.store.load("w-7")
    assert snap is not None
    # The store shows it running (its workflow records the step in flight): refused.
    from dataclasses import replace

    from steadyrun.records import Step
    from steadyrun.stores._leases import Fence, fenced

    holder = await app.store.leases.holder("w-7")
    assert holder is not None
    with fenced(Fence("w-7", holder.owner, holder.token)):
        running = replace(snap.run, status="running", steps=snap.run.steps + 1)
        await app.store.save_step("w-7", Step(run=running, checkpoint=snap.checkpoint))
    with pytest.raises(sr.RunBusyError):
        await Operations(app.runtime, engine=app.engine).delete("w-7")
    assert await app.store.load("w-7") is not None


async def test_cli_send_waits_for_the_run_as_on_the_builtin_engine(host: Host) -> None:
    await host.app.start("c-7", "chat", "Hello.")
    await host.until("c-7", "completed")
    code, out = await host.cli("runs", "send", "c-7", "And again.", "--id", "m-7", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["status"] == "completed", data
    assert data["message_id"] == "m-7" and data["text"] == "turn 2: And again.", data
    code, out = await host.cli("runs", "delete", "c-7")
    assert code == 0, out
    assert "deleted run c-7" in out


async def test_the_first_snapshot_after_a_start_shows_the_stored_status(host: Host) -> None:
    # The start shows the run (running) before the workflow records it; a follower coming
    # once it suspended sees it suspended at once, not at its next poll (30 s here).
    started = await host.app.start("w-8", "wire", "Wire 80.")
    assert started.status == "running"
    await eventually(lambda: host.pending("w-8"), lambda p: len(p) == 1)
    async with asyncio.timeout(10):
        async for event in host.app.publisher.follow("w-8", poll_interval=30.0):
            assert event.kind == "snapshot" and event.snapshot is not None
            assert event.snapshot.status == "suspended", event.snapshot
            break
    got = (await host.http.get("/runs/w-8", headers=AUTH)).json()["data"]
    assert got["status"] == "suspended"
