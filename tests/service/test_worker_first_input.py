"""A worker starting a new run reads its first input once, and loses none that follows it.

The worker claims a new run's feed to find the agent its first input names; the run's start
takes that claim instead of reading the feed again (a pending read and a claim of four
statements per run on SQLite: ``test_service_counts``). Input appended after the worker's
claim is then seen by the first step's commit and taken before the first model call.
"""

from __future__ import annotations

from typing import Any

import pytest

import steadyrun as sr
from steadyrun.service._worker import AGENT_META, drive_run
from steadyrun.stores import FeedMessage
from steadyrun.testing import FunctionModel, text


def _users(request: sr.ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]


@pytest.mark.parametrize("late", [False, True])
async def test_the_start_takes_the_workers_claim(
    monkeypatch: pytest.MonkeyPatch, late: bool
) -> None:
    store = sr.MemoryStore()
    requests: list[sr.ModelRequest] = []

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        requests.append(request)
        return text("done")

    runtime = sr.Runtime(store, agents=[sr.Agent(name="bench", model=FunctionModel(respond))])
    first = FeedMessage(id="r:input", content="first", meta={AGENT_META: "bench"})
    await store.append("r", first)
    reads: list[str] = []
    pending, claim = sr.MemoryStore.pending, sr.MemoryStore.claim

    async def counted_pending(self: Any, run_id: str, after: int) -> int:
        reads.append("pending")
        return await pending(self, run_id, after)

    async def counted_claim(self: Any, run_id: str, through: int) -> Any:
        reads.append("claim")
        taken = await claim(self, run_id, through)
        if late and reads.count("claim") == 1:  # right after the worker's claim
            await store.append("r", FeedMessage(id="r:late", content="second"))
        return taken

    monkeypatch.setattr(sr.MemoryStore, "pending", counted_pending)
    monkeypatch.setattr(sr.MemoryStore, "claim", counted_claim)
    await drive_run(runtime, "r")
    snap = await store.load("r")
    assert snap is not None and snap.run.status == "completed"
    # Every input is answered by the first model call, each exactly once.
    assert [_users(r) for r in requests] == [["first", "second"] if late else ["first"]]
    # The worker's reads of the first input are the only ones: the late input is the first
    # step's commit's to see (a claim of it), and the answer's check reads the feed once.
    assert reads[:2] == ["pending", "claim"]
    assert reads[2:] == (["claim", "pending"] if late else ["pending"])
