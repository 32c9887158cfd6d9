"""The web page in headless Chromium: a suspended run, its pending decision, approve, finished.

Needs Playwright's Python package and the Debian ``chromium`` package (/usr/bin/chromium);
no browser is downloaded. Set STEADYRUN_SCREENSHOTS=docs/images to refresh the screenshots
in the docs.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servicekit import AUTH, TOKEN, make_app

from servekit import ARGS, CHROMIUM, TIMEOUT_MS, serving
from steadyrun.service import create_app
from steadyrun.stores import MemoryStore

playwright_sync = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


@pytest.fixture
def server() -> Iterator[str]:
    api = create_app(make_app(MemoryStore()), tokens=[TOKEN], stream_poll_seconds=0.5)
    with serving(api) as base:
        yield base


def wait_status(base: str, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        runs = httpx.get(f"{base}/runs", headers=AUTH).json()["runs"]
        if any(r["run_id"] == run_id and r["status"] == status for r in runs):
            return
        assert time.monotonic() < deadline, f"{run_id} never became {status}"
        time.sleep(0.1)


def test_approve_a_suspended_run_on_the_page(server: str, tmp_path: Path) -> None:
    for run_id, agent, text in [
        ("ticket-4712", "asker", "Please refund my last order."),
        ("ticket-4711", "support", "I was charged twice for order A-1001."),
    ]:
        r = httpx.post(
            f"{server}/runs", json={"run_id": run_id, "agent": agent, "input": text}, headers=AUTH
        )
        assert r.status_code == 202
        wait_status(server, run_id, "suspended")

    shots = tmp_path
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1180, "height": 820})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(server + "/")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.click('#runs li[data-run="ticket-4711"]')
        decision = page.locator("#pending .item.decision")
        decision.wait_for()
        assert "Refund 4999 cents on A-1001?" in decision.inner_text()
        page.wait_for_selector("#run-status.suspended")
        page.wait_for_selector("#timeline .badge.awaiting_decision")
        page.screenshot(path=str(shots / "service-pending.png"))

        decision.locator("button.approve").click()
        page.wait_for_selector("#run-status.completed")
        page.wait_for_selector("#timeline li.content")
        assert "refunded the duplicate charge" in page.inner_text("#timeline")
        assert page.locator("#timeline .badge.succeeded").count() == 2
        assert page.locator("#pending-box").is_hidden()
        page.wait_for_selector('#runs li[data-run="ticket-4711"] .badge.completed')
        page.screenshot(path=str(shots / "service-completed.png"))

        # The input request of the other run: a form made from its response schema.
        page.click('#runs li[data-run="ticket-4712"]')
        form = page.locator("#pending .item.input")
        form.wait_for()
        form.locator('select[aria-label="card"]').select_option(label="visa")
        form.locator('input[aria-label="amount_cents"]').fill("4999")
        page.screenshot(path=str(shots / "service-input.png"))
        form.locator("button.answer").click()
        page.wait_for_selector("#run-status.completed")
        browser.close()

    target = os.environ.get("STEADYRUN_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for shot in shots.glob("service-*.png"):
            shutil.copy(shot, Path(target) / shot.name)


def test_the_run_page_lists_the_runs_background_tasks() -> None:
    import asyncio

    from steadyrun.background import MemoryTaskStore, Task, TaskInput, TaskManager

    store, tasks = MemoryStore(), MemoryTaskStore()
    app = make_app(store)
    app.runtime.use_tasks(TaskManager(tasks, store, []))
    for task in [
        Task(id="t-1/c1", run_id="ticket-1", call_id="c1", tool="crawl", arguments="{}",
             description="crawl the shop", status="completed"),
        Task(id="t-1/c2", run_id="ticket-1", call_id="c2", tool="deploy", arguments="{}",
             status="waiting_input", input=TaskInput(wait_id="w", prompt="Which region?")),
    ]:  # fmt: skip
        asyncio.run(tasks.insert(task))
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=0.5)
    with serving(api) as base:
        body = {"run_id": "ticket-1", "agent": "support", "input": "I was charged twice."}
        assert httpx.post(f"{base}/runs", json=body, headers=AUTH).status_code == 202
        wait_status(base, "ticket-1", "suspended")
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(base + "/")
            page.fill("#token", TOKEN)
            page.click("#login-form button")
            page.click('#runs li[data-run="ticket-1"]')
            line = page.locator("#tasks-line")
            line.wait_for()
            assert line.inner_text() == (
                "Background tasks: crawl the shop: completed · "
                "deploy: waiting input (asks: Which region?)"
            )
            browser.close()
