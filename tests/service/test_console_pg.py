"""The console's acceptance (issue 22): a person drives a run end to end on the page.

On a PostgreSQL store, ``steadyrun serve --no-worker`` serves the page and one separate
``steadyrun worker`` executes the run (both load ``console_app``). In Debian's Chromium a
person signs in, starts a run, watches the model's text arrive, approves one refund with an
edit and rejects another, answers the customer question, records the bank's answer, sends a
steering message while a slow side effect runs, sees the worker SIGKILLed and the run go on
in a second worker, acknowledges the cut call (needs review) and finds the whole audit trail.

Set STEADYRUN_SCREENSHOTS=docs/images to refresh the screenshots in docs/service.md.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import pgkit
from servekit import ARGS, CHROMIUM, TIMEOUT_MS

HERE = Path(__file__).parent
TOKEN = "console-token-4242"
PRINCIPAL = "alice"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TTL = 2.0
RUN = "order-a1"

playwright_sync = pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")

pg_dsn = pgkit.database_fixture()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _within(seconds: float, ok: Callable[[], bool], what: str, procs: Procs) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s\n{procs.logs()}"
        time.sleep(0.1)


class Procs:
    """The serve and worker processes of the test."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn, self.tmp = dsn, tmp
        self.effects = tmp / "ledger.txt"
        self.effects.touch()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "SERVE_DSN": self.dsn,
            "SERVE_EFFECTS": str(self.effects),
            "SERVE_SLOW": "600",  # the ship is cut by the kill, never finished
            "STEADYRUN_API_TOKENS": f"{PRINCIPAL}:{TOKEN}",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        cmd = [sys.executable, "-m", "steadyrun", *args, "--app", "console_app:app"]
        with (self.tmp / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(cmd, env=env, cwd=HERE, stdout=log, stderr=log)
        self.procs[name] = proc
        return proc

    def serve(self) -> str:
        port = _free_port()
        proc = self.spawn("serve", ["serve", "--port", str(port), "--no-worker"])
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return proc.poll() is None and httpx.get(f"{base}/health").status_code == 200
            except httpx.HTTPError:
                return False

        _within(60, healthy, "serve answering", self)
        return base

    def worker(self, name: str) -> subprocess.Popen[bytes]:
        return self.spawn(name, ["worker", "--claim-ttl", str(TTL), "--concurrency", "2"])

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{self.log(name)[-3000:]}" for name in self.procs)

    def ledger(self) -> list[list[str]]:
        return [line.split() for line in self.effects.read_text().splitlines() if line]

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def procs(pg_dsn: str, tmp_path: Path) -> Iterator[Procs]:
    running = Procs(pg_dsn, tmp_path)
    try:
        yield running
    finally:
        running.close()


def _call(base: str, name: str, nth: int = 0) -> dict[str, object]:
    snap = httpx.get(f"{base}/runs/{RUN}", headers=AUTH).json()["data"]
    return [c for c in snap["calls"] if c["name"] == name][nth]  # type: ignore[no-any-return]


def test_a_person_drives_a_run_through_the_console(procs: Procs, tmp_path: Path) -> None:
    base = procs.serve()
    worker = procs.worker("worker-1")
    shots = tmp_path / "shots"
    shots.mkdir()

    def shot(page: object, name: str, *, full: bool = False, at: str | None = None) -> None:
        # The top of the page, or the element ``at`` in the middle of the view.
        if at is None:
            page.evaluate("window.scrollTo(0, 0)")  # type: ignore[attr-defined]
        else:
            page.eval_on_selector(at, "e => e.scrollIntoView({block: 'center'})")  # type: ignore[attr-defined]
        path = str(shots / f"console-{name}.png")
        page.screenshot(path=path, full_page=full)  # type: ignore[attr-defined]

    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(base + "/")
        # Signed out: the token form and nothing else.
        assert page.locator("#login").is_visible() and page.locator("#main").is_hidden()
        assert page.locator("#inbox-box").is_hidden() and page.locator("#who").is_hidden()
        shot(page, "signin")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.wait_for_selector(f'#who:has-text("signed in as {PRINCIPAL}")')

        # Start a run from the page; it opens, and the model's words arrive as it writes them.
        page.select_option("#start-agent", "console")
        page.fill("#start-input", "I was charged twice for order A-1, and it never arrived.")
        page.fill("#start-id", RUN)
        page.click("#start-go")
        page.wait_for_selector(f'#run-title:has-text("{RUN}")')
        page.wait_for_selector("#timeline li.input >> text=charged twice")
        live = page.locator("#timeline li.live .text")
        live.wait_for()
        page.wait_for_function(
            "() => (document.querySelector('#timeline li.live .text') || {}).textContent"
            "?.split(' ').length > 8"
        )
        shot(page, "streaming")

        # Four things wait for the person: two approvals, a question, the bank's answer.
        page.wait_for_selector("#run-status.suspended")
        pending = page.locator("#pending > .item")
        _within(30, lambda: pending.count() == 4, "four pending items", procs)
        page.wait_for_selector('#inbox li.inbox-item[data-run="order-a1"]')
        assert page.locator("#inbox li.inbox-item").count() == 4
        shot(page, "pending")

        ids = page.eval_on_selector_all(
            "#pending .item.decision", "els => els.map((e) => e.dataset.call)"
        )
        first, second = (page.locator(f'#pending .item[data-call="{i}"]') for i in ids)

        def done(item: object) -> None:  # the run no longer waits for it: it leaves the list
            item.wait_for(state="detached")  # type: ignore[attr-defined]

        first.locator("button.edit").click()
        edit = first.locator('textarea[aria-label="arguments"]')
        # The API's typed error shows beside the form: edited arguments must fit the tool.
        edit.fill('{"order_id": "A-1", "amount_cents": "forty"}')
        first.locator("button.approve").click()
        first.locator(".msg.error:has-text('amount_cents')").wait_for()
        edit.fill('{"order_id": "A-1", "amount_cents": 4000}')
        first.locator('input[aria-label="reason"]').fill("the fee stays; refund 40.00")
        first.locator("button.approve").click()
        done(first)
        second.locator('input[aria-label="reason"]').fill("A-2 had no late fee")
        second.locator("button.reject").click()
        done(second)
        question = page.locator("#pending .item.input")
        question.locator('select[aria-label="card"]').select_option(label="mastercard")
        question.locator("button.answer").click()
        done(question)
        bank = page.locator("#pending .item.result")
        bank.locator("button.settle-result").click()
        bank.locator(".msg.error:has-text('Write the outcome first.')").wait_for()
        bank.locator('textarea[aria-label="outcome"]').fill("bank confirms the duplicate charge")
        page.wait_for_function("document.querySelectorAll('#inbox li.inbox-item').length === 1")
        shot(page, "decided")
        bank.locator("button.settle-result").click()
        done(bank)

        # The run goes on and starts the slow shipment; the person steers it meanwhile.
        shipping = lambda: any(line[:2] == ["start", RUN] for line in procs.ledger())  # noqa: E731
        _within(60, shipping, "the shipment started", procs)
        page.wait_for_selector("#run-status.running")
        page.fill("#message-text", "Please send the replacement by express.")
        page.click("#message-send")
        page.wait_for_selector("#message-msg:has-text('Sent by alice')")
        # Until the run takes it (at its next safe point), the message shows as waiting.
        page.wait_for_selector("#queued li.queued >> text=by express")

        # The worker dies inside the side effect; the page keeps showing the run as it was.
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
        page.wait_for_selector("#timeline li[data-call] .badge.running")
        page.wait_for_selector("#inbox li.inbox-item", state="detached")
        shot(page, "killed", at="#timeline li[data-call]:has(.badge.running)")
        procs.worker("worker-2")
        page.wait_for_selector("#run-status.completed", timeout=90_000)
        page.wait_for_selector("#timeline li.content >> text=replacement by express")
        page.wait_for_selector("#timeline li.input >> text=by express")
        assert page.locator("#queued li").count() == 0
        # The cut call is flagged on the run, in the list and in the inbox.
        page.wait_for_selector("#review-flag:has-text('ship_replacement')")
        page.wait_for_selector(f'#runs li[data-run="{RUN}"] .flag-review')
        page.wait_for_selector("#inbox li.inbox-item.review")
        page.wait_for_selector("#timeline li.tool_call.review .badge.needs_review")
        shot(page, "review")

        review = page.locator("#pending .item.review")
        review.locator('textarea[aria-label="outcome"]').fill(
            "carrier confirms the replacement left the warehouse"
        )
        review.locator("button.settle-result").click()
        page.wait_for_selector("#review-flag", state="hidden")
        page.wait_for_selector("#pending-box", state="hidden")

        # The audit trail: every message, decision, answer and outcome with who and when.
        timeline = page.locator("#timeline")
        inputs = page.locator("#timeline li.input")
        assert inputs.count() == 2
        metas = [inputs.nth(i).get_attribute("data-meta") or "" for i in range(2)]
        assert all(m.startswith(f"message from {PRINCIPAL} · ") and "UTC" in m for m in metas)
        trail = timeline.inner_text()
        assert "asked: Refund 4999 cents on A-1? — approved with edits by alice at" in trail
        assert "asked: Refund 1500 cents on A-2? — rejected by alice at" in trail
        assert "refund 40.00" in trail and "A-2 had no late fee" in trail
        assert "rejected rejected" not in trail
        assert "Which card should the refund go to?" in trail
        assert '{"card":"mastercard"} by alice at' in trail
        assert "outcome recorded by alice" in trail
        assert "needed review: checked, outcome recorded by alice" in trail
        assert "carrier confirms the replacement" in trail
        assert "took" in trail  # durations of the calls
        usage = page.locator("#timeline li.content").first.get_attribute("data-meta") or ""
        assert "model call m" in usage and "tokens" in usage
        page.wait_for_selector("#inbox li.inbox-item", state="detached")
        page.wait_for_selector(f'#runs li[data-run="{RUN}"] .flag-review', state="detached")
        shot(page, "audit", full=True)
        browser.close()

    # What the page showed is what the store holds.
    ship = _call(base, "ship_replacement")
    assert ship["settled_by"] == PRINCIPAL and ship["status"] == "succeeded"
    refunds = [_call(base, "refund", i) for i in (0, 1)]
    assert [r["status"] for r in refunds] == ["succeeded", "rejected"]
    starts = [line for line in procs.ledger() if line[0] == "start"]
    assert len(starts) == 1, "the cut side effect never ran again"
    assert not any("Traceback" in procs.log(n) for n in procs.procs), procs.logs()

    target = os.environ.get("STEADYRUN_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for png in shots.glob("console-*.png"):
            shutil.copy(png, Path(target) / png.name)
