"""``TemporalRuns`` with the cluster gone: steadyrun's typed ``EngineUnavailableError``.

Every public method of ``TemporalRuns``, called while the Temporal server does not answer,
raises ``EngineUnavailableError`` (a ``StoreError``: the service answers it 503, the CLI
exits with its message), with Temporal's ``RPCError`` as its cause, never the raw error.
And the handle ``start`` returns waits through ``TemporalRuns.result``: its ``result()``
raises steadyrun's errors too.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import uuid  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporal_parity_kit import build_parity_app  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.service import RetryConfig, RPCError  # noqa: E402
from test_temporal_engine import eventually  # noqa: E402

from steadyrun import RunCancelledError, StoreError  # noqa: E402

EngineUnavailableError = StoreError
from steadyrun.temporal import DevServer, TemporalRuns  # noqa: E402

CALLS: dict[str, Callable[[TemporalRuns], Awaitable[Any]]] = {
    "start": lambda r: r.start("chat", run_id="r-1", input="Hello."),
    "run": lambda r: r.run("chat", run_id="r-1", input="Hello."),
    "result": lambda r: r.result("r-1"),
    "resume": lambda r: r.resume("r-1"),
    "pending": lambda r: r.pending("r-1"),
    "tasks": lambda r: r.tasks("r-1"),
    "snapshot": lambda r: r.snapshot("r-1"),
    "status": lambda r: r.status("r-1"),
    "decide": lambda r: r.decide("r-1", "c-1", approve=True),
    "answer": lambda r: r.answer("r-1", "w-1", "yes"),
    "settle": lambda r: r.settle("r-1", "c-1", result="done"),
    "send": lambda r: r.send("r-1", "More."),
    "cancel": lambda r: r.cancel("r-1"),
}


async def test_every_method_raises_engine_unavailable_when_the_server_is_gone(
    tmp_path: Path,
) -> None:
    server = DevServer(db_file=tmp_path / "temporal.db")
    await server.start()
    # No retries: the client's default backs off for many seconds before it gives up.
    client = await Client.connect(
        server.target, retry_config=RetryConfig(max_retries=1, max_elapsed_time_millis=200)
    )
    runs = TemporalRuns(client, task_queue=f"q-{uuid.uuid4().hex}")
    await server.stop()
    for name, call in CALLS.items():
        with pytest.raises(EngineUnavailableError) as caught:
            await call(runs)
        assert isinstance(caught.value, StoreError), name
        assert isinstance(caught.value.__cause__, RPCError), name
        assert "Temporal" in str(caught.value), name


async def test_the_started_handle_waits_with_typed_errors(
    temporal_server: Any, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_server.target)
    queue = f"q-{uuid.uuid4().hex}"
    app = build_parity_app(tmp_path / "runs.db", tmp_path / "fx", task_queue=queue)
    runs = TemporalRuns(client, task_queue=queue)
    tag = uuid.uuid4().hex
    async with app.worker(client):
        done = await runs.start("chat", run_id=f"done-{tag}", input="Hello.")
        assert (await done.result()).status == "completed"
        waiting = await runs.start("wire", run_id=f"gone-{tag}", input="Wire 30.")
        await eventually(lambda: runs.pending(f"gone-{tag}"), lambda p: len(p) == 1)
        await runs.cancel(f"gone-{tag}")
        with pytest.raises(RunCancelledError):
            await waiting.result()
        assert waiting.id == f"gone-{tag}"  # still a WorkflowHandle for Temporal's own calls
        assert (await waiting.describe()).id == f"gone-{tag}"


async def test_the_service_answers_503_engine_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the service extra is not installed")
    import httpx
    from temporal_parity_kit import Deps, parity_agents

    import steadyrun as sr
    from steadyrun.service import App, create_app
    from steadyrun.temporal import TemporalEngine

    server = DevServer(db_file=tmp_path / "temporal.db")
    await server.start()
    client = await Client.connect(
        server.target, retry_config=RetryConfig(max_retries=1, max_elapsed_time_millis=200)
    )
    await server.stop()
    store = sr.SqliteStore(tmp_path / "runs.db")
    engine = TemporalEngine(client, task_queue=f"q-{uuid.uuid4().hex}")
    app = App(store, agents=parity_agents(Deps(effects=tmp_path / "fx")), engine=engine)
    api = create_app(app, tokens={"t0k": "alice"})
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    auth = {"Authorization": "Bearer t0k"}
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            body = {"agent": "chat", "input": "Hello.", "run_id": "c-1"}
            started = await http.post("/runs", json=body, headers=auth)
            assert started.status_code == 503, started.text
            assert started.json()["error"] == "engine_unavailable", started.text
            assert "Temporal" in started.json()["message"]
    finally:
        await app.close()
        await store.close()
