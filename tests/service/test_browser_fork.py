"""The page's steps and "Fork from here", in headless Chromium.

Needs Playwright's Python package and the Debian ``chromium`` package (/usr/bin/chromium), as
test_browser.py does. Set STEADYRUN_SCREENSHOTS=docs/images to refresh the screenshot.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from servicekit import AUTH, TOKEN
from test_browser import server, wait_status

from servekit import ARGS, CHROMIUM, TIMEOUT_MS

playwright_sync = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")

__all__ = ["server"]  # the fixture, shared with test_browser.py


def test_fork_from_a_step_on_the_page(server: str, tmp_path: Path) -> None:
    body = {"run_id": "ticket-4711", "agent": "support", "input": "I was charged twice."}
    assert httpx.post(f"{server}/runs", json=body, headers=AUTH).status_code == 202
    wait_status(server, "ticket-4711", "suspended")
    decision = {"approve": True, "decided_by": "test"}
    r = httpx.post(f"{server}/runs/ticket-4711/calls/m2.c1/decision", json=decision, headers=AUTH)
    assert r.status_code == 200
    wait_status(server, "ticket-4711", "completed")

    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1180, "height": 1100})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(server + "/")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.click('#runs li[data-run="ticket-4711"]')
        page.wait_for_selector("#run-status.completed")
        page.click("#history-load")
        steps = page.locator("#history > li[data-step]")
        steps.nth(6).wait_for()
        assert steps.count() == 7
        refund_step = page.locator('#history > li[data-step="4"]')
        assert "refund(" in refund_step.inner_text()
        refund_step.locator("button.fork").click()
        form = refund_step.locator(".fork-form")
        assert form.locator('input[aria-label="new run id"]').input_value() == (
            "ticket-4711-from-4"
        )
        page.screenshot(path=str(tmp_path / "service-fork.png"))
        form.locator("button.fork-go").click()
        page.wait_for_selector('#run-title:has-text("ticket-4711-from-4")')
        page.wait_for_selector("#run-status.completed")
        # The refund approved in the original did not run again in the fork.
        page.wait_for_selector('#timeline li[data-call="m2.c1"] .badge.cancelled')
        page.click("#history-load")
        page.wait_for_selector('#history li[data-step="4"] >> text=forked from ticket-4711')
        browser.close()

    original = httpx.get(f"{server}/runs/ticket-4711/history", headers=AUTH).json()["steps"]
    assert len(original) == 7  # untouched
    target = os.environ.get("STEADYRUN_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "service-fork.png", Path(target) / "service-fork.png")
