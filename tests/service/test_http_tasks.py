"""``GET /runs/{id}/tasks``: a run's background tasks, the same shape whatever the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from servicekit import AUTH, TOKEN, make_app

from steadyrun.background import MemoryTaskStore, Task, TaskInput, TaskManager
from steadyrun.service import App, create_app
from steadyrun.service._shapes import task_out
from steadyrun.stores import MemoryStore


@pytest.fixture
async def served() -> AsyncIterator[tuple[App, MemoryTaskStore, httpx.AsyncClient]]:
    store = MemoryStore()
    tasks = MemoryTaskStore()
    app = make_app(store)
    app.runtime.use_tasks(TaskManager(tasks, store, []))
    api = create_app(app, tokens=[TOKEN])
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield app, tasks, c
    await app.close()


async def test_a_runs_tasks_are_listed_with_their_question(
    served: tuple[App, MemoryTaskStore, httpx.AsyncClient],
) -> None:
    app, tasks, http = served
    await app.runtime.run(app.agent("support"), run_id="r1", input="hello")
    when = datetime(2026, 1, 1, tzinfo=UTC)
    await tasks.insert(
        Task(id="r1/c1", run_id="r1", call_id="c1", tool="crawl", arguments="{}",
             description="crawl the site", status="completed", output="42 pages",
             created_at=when, updated_at=when)
    )  # fmt: skip
    await tasks.insert(
        Task(id="r1/c2", run_id="r1", call_id="c2", tool="deploy", arguments="{}",
             status="waiting_input", input=TaskInput(wait_id="w1", prompt="Which region?"))
    )  # fmt: skip
    got = await http.get("/runs/r1/tasks", headers=AUTH)
    assert got.status_code == 200, got.text
    listed = got.json()["tasks"]
    assert [t["id"] for t in listed] == ["r1/c1", "r1/c2"]
    assert listed[0]["status"] == "completed" and listed[0]["output"] == "42 pages"
    assert listed[0]["description"] == "crawl the site"
    assert listed[1]["question"] == {
        "wait_id": "w1",
        "prompt": "Which region?",
        "answered": False,
        "answered_by": None,
    }
    assert listed[0]["question"] is None


async def test_a_run_without_tasks_lists_none_and_an_unknown_run_is_404(
    served: tuple[App, MemoryTaskStore, httpx.AsyncClient],
) -> None:
    app, _, http = served
    await app.runtime.run(app.agent("support"), run_id="r2", input="hello")
    got = await http.get("/runs/r2/tasks", headers=AUTH)
    assert got.status_code == 200 and got.json() == {"tasks": []}
    missing = await http.get("/runs/nope/tasks", headers=AUTH)
    assert missing.status_code == 404


async def test_an_app_without_a_task_manager_lists_no_tasks() -> None:
    app = make_app(MemoryStore())
    await app.runtime.run(app.agent("support"), run_id="r3", input="hello")
    assert await app.tasks("r3") == []
    await app.close()


def test_the_shape_of_a_task_is_plain_json() -> None:
    task = Task(id="r/c", run_id="r", call_id="c", tool="t", arguments="{}", output={"n": 1})
    shown = task_out(task).model_dump(mode="json")
    assert shown["output"] == {"n": 1} and shown["needs_review"] is False
