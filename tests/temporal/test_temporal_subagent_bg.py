"""A sub-agent's background calls on Temporal: adopted, and its later turns told to the parent.

The scenarios both engines share are in ``bg_subagents``; here what is Temporal's own:
histories of delegations written before ``steadyrun.subagent-background`` (and of later turns
before ``steadyrun.subagent-later-turns``) replay, the parent continues as new while its
child's task runs, cancelling the parent stops the child's task, and a worker SIGKILLed while
the child's task runs.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_kit import effects  # noqa: E402
from temporal_subbg_kit import build_app  # noqa: E402
from temporalio.client import Client, WorkflowHistory  # noqa: E402
from test_temporal_background import heartbeat_details, kill  # noqa: E402
from test_temporal_engine import eventually  # noqa: E402

import steadyrun as sr  # noqa: E402

DATA = Path(__file__).with_name("data")
WORKER = Path(__file__).with_name("temporal_subbg_worker.py")
NOTE = 'Background task {r}/m1.c1/m1.c1 (build) completed:\n{{"artifact": "app.tar"}}'


def follow_up(note: str) -> str:
    return sr.Texts().subagent_follow_up.format(call_id="m1.c1", text="child told: " + note)


class Farm:
    """The test's side of one lead run: its app, folders and the build's job."""

    def __init__(self, tmp: Path, **options: Any) -> None:
        self.tmp = tmp
        self.queue = f"q-{uuid.uuid4().hex}"
        self.run_id = f"lead-{uuid.uuid4().hex[:8]}"
        self.child = f"{self.run_id}/m1.c1"
        (tmp / "jobs").mkdir(exist_ok=True)
        self.app = build_app(
            tmp / "runs.db", tmp / "jobs", tmp / "fx", task_queue=self.queue, **options
        )

    def effects(self) -> list[str]:
        return effects(self.tmp / "fx")

    def job(self) -> str:
        return f"{self.child}/m1.c1".replace("/", "_")

    def finish(self) -> None:
        (self.tmp / "jobs" / f"{self.job()}.done").write_text(json.dumps({"artifact": "app.tar"}))

    async def first_turn(self, store: sr.Store) -> sr.RunSnapshot:
        async def completed() -> Any:
            return await store.load(self.run_id)

        snap: sr.RunSnapshot = await eventually(
            completed, lambda s: s is not None and s.run.status == "completed"
        )
        return snap

    async def replay(self, client: Client) -> None:
        for workflow_id in (self.run_id, self.child):
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            await self.app.replayer().replay_workflow(history)


async def test_delegations_recorded_before_the_change_replay(tmp_path: Path) -> None:
    # Recorded with main 6041153: the child's build waited in the foreground.
    data = json.loads((DATA / "subagent_bg_before.json").read_text())
    app = build_app(tmp_path / "runs.db", tmp_path, tmp_path / "fx", task_queue="subbg-before")
    for workflow_id, text in data.items():
        history = WorkflowHistory.from_json(workflow_id, text)
        await app.replayer().replay_workflow(history)


async def test_later_turns_recorded_before_their_usage_and_states_were_taken_replay(
    tmp_path: Path,
) -> None:
    # Recorded with main 6423012, before steadyrun.subagent-later-turns: the child's first
    # turn and its later turn signalled to the lead without their states, the lead adding
    # nothing of the later turn's usage.
    data = json.loads((DATA / "subagent_later_before.json").read_text())
    app = build_app(tmp_path / "runs.db", tmp_path, tmp_path / "fx", task_queue="subbg-later")
    for workflow_id, text in data.items():
        history = WorkflowHistory.from_json(workflow_id, text)
        await app.replayer().replay_workflow(history)


async def test_a_sub_agents_task_ending_is_told_to_the_parent(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_server.target)
    farm = Farm(tmp_path)
    runs, store = farm.app.runs(client), sr.SqliteStore(tmp_path / "runs.db")
    async with farm.app.worker(client):
        await runs.start("lead", run_id=farm.run_id, input="build app")
        first = await farm.first_turn(store)
        # The child answered its receipt; that answer is the delegation's result, at once.
        answer = next(c for c in first.calls if c.id == "m1.c1").result or ""
        assert answer.startswith("child: ")
        receipt = json.loads(answer.removeprefix("child: "))
        assert receipt["task_id"] == f"{farm.child}/m1.c1" and receipt["status"] == "running"
        farm.finish()
        out = await asyncio.wait_for(runs.result(farm.run_id), 120)  # a cap, not a limit
        await farm.replay(client)
        child = await store.load(farm.child)
    await store.close()
    note = NOTE.format(r=farm.run_id)
    assert out.status == "completed" and out.text == "lead told: " + follow_up(note)
    assert child is not None and child.run.status == "completed"
    assert [e.split()[0] for e in farm.effects()] == ["start"]


async def test_the_parent_continues_as_new_while_its_childs_task_runs(
    temporal_server: Any, tmp_path: Path
) -> None:
    # Past the history length at every step: the parent continues as new with its child
    # going (carried), and the child, abandoned by the earlier run, signals the current one.
    client = await Client.connect(temporal_server.target)
    farm = Farm(tmp_path, continue_as_new_after=1)
    runs, store = farm.app.runs(client), sr.SqliteStore(tmp_path / "runs.db")
    async with farm.app.worker(client):
        await runs.start("lead", run_id=farm.run_id, input="build app")
        await farm.first_turn(store)
        await runs.send(farm.run_id, "how is it going?")

        async def heard() -> Any:
            snap = await store.load(farm.run_id)
            said = [m.text for m in snap.context if m.role == "assistant"] if snap else []
            return said and said[-1] == "lead heard: how is it going?"

        await eventually(heard, bool)
        farm.finish()
        out = await asyncio.wait_for(runs.result(farm.run_id), 120)  # a cap, not a limit
        await farm.replay(client)
        child = await store.load(farm.child)
        lead = await store.load(farm.run_id)
        described = await client.get_workflow_handle(farm.child).describe()
    await store.close()
    note = NOTE.format(r=farm.run_id)
    assert out.status == "completed" and out.text == "lead told: " + follow_up(note)
    assert out.generations >= 1  # continued as new while the child's task ran
    assert described.status is not None and described.status.name == "COMPLETED"
    assert child is not None and child.run.status == "completed"
    assert [e.split()[0] for e in farm.effects()] == ["start"]  # started once, never stopped
    assert lead is not None
    told = [m for m in lead.context if m.role == "system" and m.text == follow_up(note)]
    assert len(told) == 1
    # The lead's four model calls and its child's three, the later turn's counted after the
    # lead continued as new (what it had counted of the child was carried).
    assert lead.run.usage.requests == 7


async def test_cancelling_the_parent_stops_its_childs_task(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_server.target)
    farm = Farm(tmp_path)
    runs, store = farm.app.runs(client), sr.SqliteStore(tmp_path / "runs.db")
    async with farm.app.worker(client):
        await runs.start("lead", run_id=farm.run_id, input="build app and ship it")

        async def asks() -> bool:
            return any(i.kind == "decision" for i in await runs.pending(farm.run_id))

        await eventually(asks, bool)  # the lead waits for a decision, its child's task going
        await runs.cancel(farm.run_id, by="ann")

        async def stopped() -> bool:
            return f"stop {farm.job()}" in farm.effects()

        await eventually(stopped, bool)
        with pytest.raises(sr.RunCancelledError):
            await runs.result(farm.run_id)

        lead = await store.load(farm.run_id)
        child = await store.load(farm.child)
    await store.close()
    assert lead is not None and lead.run.status == "cancelled" and lead.run.cancelled_by == "ann"
    # The child's turn had completed (its delegation returned): it stays completed, its task
    # cancelled, as on the built-in engine.
    assert child is not None and child.run.status == "completed"
    assert [e.split()[0] for e in farm.effects()] == ["start", "stop"]


async def test_a_later_turn_that_comes_while_the_parent_waits_for_a_decision_is_counted(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_server.target)
    farm = Farm(tmp_path)
    runs, store = farm.app.runs(client), sr.SqliteStore(tmp_path / "runs.db")
    async with farm.app.worker(client):
        await runs.start("lead", run_id=farm.run_id, input="build app and ship it")

        async def asks() -> list[sr.PendingItem]:
            return [i for i in await runs.pending(farm.run_id) if i.kind == "decision"]

        (decision,) = await eventually(asks, bool)  # the lead waits, its child's task going
        farm.finish()

        async def child_ended() -> bool:
            described = await client.get_workflow_handle(farm.child).describe()
            return described.status is not None and described.status.name == "COMPLETED"

        await eventually(child_ended, bool)  # its later turn signalled to the waiting lead
        await runs.decide(farm.run_id, decision.call_id, approve=True)
        out = await asyncio.wait_for(runs.result(farm.run_id), 120)  # a cap, not a limit
        await farm.replay(client)
        lead = await store.load(farm.run_id)
    await store.close()
    assert out.status == "completed" and (out.text or "").startswith("lead told: ")
    # The lead's three model calls (delegate, ship, told) and its child's three.
    assert lead is not None and lead.run.usage.requests == 6


def start_worker(server: Any, farm: Farm) -> subprocess.Popen[str]:
    tmp = farm.tmp
    args = [server.target, farm.queue, str(tmp / "runs.db"), str(tmp / "jobs"), str(tmp / "fx")]
    proc = subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the worker polls (or dies)
    assert line.strip() == "ready", f"worker did not start: {line!r}"
    return proc


async def test_a_childs_task_survives_a_killed_worker_and_the_parent_is_told_once(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_server.target)
    farm = Farm(tmp_path)
    runs, store = farm.app.runs(client), sr.SqliteStore(tmp_path / "runs.db")
    first = await asyncio.to_thread(start_worker, temporal_server, farm)
    second = None
    try:
        await runs.start("lead", run_id=farm.run_id, input="build app")
        await farm.first_turn(store)  # the child's task adopted, the delegation returned
        child = client.get_workflow_handle(farm.child)
        details = await eventually(lambda: heartbeat_details(child), bool)
        assert details[0]["job"] == farm.job()
        kill(first)
        second = await asyncio.to_thread(start_worker, temporal_server, farm)
        # The second worker re-attaches to the same job from the heartbeat's checkpoint.
        await eventually(lambda: asyncio.to_thread(farm.effects), lambda f: len(f) > 1)
        farm.finish()
        out = await asyncio.wait_for(runs.result(farm.run_id), 180)  # a cap, not a limit
        lead = await store.load(farm.run_id)
    finally:
        kill(first)
        if second is not None:
            kill(second)
        await store.close()
    note = NOTE.format(r=farm.run_id)
    assert out.status == "completed" and out.text == "lead told: " + follow_up(note)
    start, recover = farm.effects()
    assert start == f"start {farm.job()} app" and recover.startswith(f"recover {farm.job()}")
    assert lead is not None
    told = [m for m in lead.context if m.role == "system" and m.text == follow_up(note)]
    assert len(told) == 1  # the child's later turn reached the parent once
