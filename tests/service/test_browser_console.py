"""The console's lists and run actions in headless Chromium, on an in-memory store.

The run list's filters, search by id and paging by cursor; starting a run from the page (and
the API's refusal shown inline); a failed run resumed with its button; a completed run
continued by a message; a suspended run cancelled; who did each, from the token's principal.
The PostgreSQL acceptance (test_console_pg.py) drives the handovers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servicekit import support_agent

import steadyrun as sr
from servekit import serving
from steadyrun.service import App, create_app
from steadyrun.stores import MemoryStore
from steadyrun.testing import FunctionModel, text

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
TIMEOUT_MS = 60_000
TOKEN = "console-bob-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHATS = 30

playwright_sync = pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


def _echo(request: sr.ModelRequest) -> sr.ModelResponse:
    users = [m.text for m in request.messages if m.role == "user"]
    return text(f"You said: {users[-1]}")


class Flaky:
    """Fails its first model call (the provider was down), then echoes."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, request: sr.ModelRequest) -> sr.ModelResponse:
        if not self.failed:
            self.failed = True
            raise ConnectionError("the provider is unreachable")
        return _echo(request)


@pytest.fixture
def server() -> Iterator[str]:
    agents = [
        support_agent(),
        sr.Agent(name="chat", model=FunctionModel(_echo)),
        sr.Agent(name="flaky", model=FunctionModel(Flaky())),
    ]
    api = create_app(App(MemoryStore(), agents=agents), tokens={TOKEN: "bob"})
    with serving(api) as base:
        yield base


def _wait_status(base: str, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 60
    while httpx.get(f"{base}/runs/{run_id}", headers=AUTH).json()["data"]["status"] != status:
        assert time.monotonic() < deadline, f"{run_id} never became {status}"
        time.sleep(0.05)


def _start(base: str, run_id: str, agent: str, input: str) -> None:
    body = {"run_id": run_id, "agent": agent, "input": input}
    assert httpx.post(f"{base}/runs", json=body, headers=AUTH).status_code == 202


def test_lists_start_resume_continue_and_cancel_on_the_page(server: str) -> None:
    for i in range(CHATS):
        _start(server, f"c{i:02d}", "chat", f"hello {i}")
    _start(server, "ticket-1", "support", "I was charged twice for A-1001.")
    for i in range(CHATS):
        _wait_status(server, f"c{i:02d}", "completed")
    _wait_status(server, "ticket-1", "suspended")

    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(server + "/")
        assert page.locator("#main").is_hidden() and page.locator("#runs-pane").is_hidden()
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.wait_for_selector('#who:has-text("signed in as bob")')

        # The list: a page of 25, then the older ones by cursor; filters and search.
        runs = page.locator("#runs li[data-run]")
        page.wait_for_selector("#more:not([hidden])")
        assert runs.count() == 25
        page.click("#more")
        page.wait_for_function("document.querySelectorAll('#runs li[data-run]').length === 31")
        page.wait_for_selector("#more", state="hidden")
        page.select_option("#f-status", "suspended")
        page.wait_for_function("document.querySelectorAll('#runs li[data-run]').length === 1")
        assert runs.first.get_attribute("data-run") == "ticket-1"
        page.select_option("#f-status", "")
        page.fill("#f-search", "c1")
        page.wait_for_function("document.querySelectorAll('#runs li[data-run]').length === 10")
        page.fill("#f-search", "")
        page.select_option("#f-agent", "support")
        page.wait_for_function("document.querySelectorAll('#runs li[data-run]').length === 1")
        page.select_option("#f-agent", "")
        # The inbox: the support run's approval, filtered by kind.
        page.wait_for_selector('#inbox li.inbox-item.decision[data-run="ticket-1"]')
        page.select_option("#inbox-kind", "review")
        page.wait_for_selector("#inbox li.inbox-item", state="detached")
        page.select_option("#inbox-kind", "")

        # Start a run from the page: its model fails; "resume the run to retry" has a button.
        page.select_option("#start-agent", "flaky")
        page.fill("#start-input", "Are you there?")
        page.fill("#start-id", "flaky-1")
        page.click("#start-go")
        page.wait_for_selector('#run-title:has-text("flaky-1")')
        page.wait_for_selector("#run-status.failed")
        assert "resume the run to retry" in page.inner_text("#final")
        page.click("#resume")
        page.wait_for_selector("#run-status.completed")
        page.wait_for_selector("#timeline li.content >> text=You said: Are you there?")
        page.wait_for_selector("#resume", state="hidden")

        # The same run id with other input: the API's 409, beside the form.
        page.fill("#start-input", "Something else")
        page.fill("#start-id", "flaky-1")
        page.click("#start-go")
        page.wait_for_selector("#start-msg.error")
        assert "flaky-1" in page.inner_text("#start-msg")

        # Continue a completed run: a new turn answers the message, which says who sent it.
        page.fill("#f-search", "c00")  # the oldest run: found by its id
        page.click('#runs li[data-run="c00"]')
        page.wait_for_selector('#run-title:has-text("c00")')
        page.wait_for_selector('#message-title:has-text("Continue the run")')
        page.fill("#message-text", "and once more")
        page.click("#message-send")
        page.wait_for_selector("#timeline li.content >> text=You said: and once more")
        steer = page.locator("#timeline li.input").nth(1)
        assert (steer.get_attribute("data-meta") or "").startswith("message from bob · ")
        assert page.inner_text("#message-msg") == "Sent by bob."

        # Cancel a suspended run (two clicks); the page says who cancelled it.
        page.fill("#f-search", "")
        page.click('#runs li[data-run="ticket-1"]')
        page.wait_for_selector("#run-status.suspended")
        page.click("#cancel")
        page.wait_for_selector('#cancel:has-text("Really cancel?")')
        page.click("#cancel")
        page.wait_for_selector("#run-status.cancelled")
        page.wait_for_selector('#run-meta:has-text("cancelled by bob")')
        assert page.locator("#message-box").is_hidden() and page.locator("#cancel").is_hidden()
        page.wait_for_selector('#runs li[data-run="ticket-1"] .badge.cancelled')
        browser.close()
