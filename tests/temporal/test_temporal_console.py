"""One host for both engines (issue 24): ``steadyrun serve --engine temporal`` with the page.

``serve`` runs the HTTP API, the page and an embedded Temporal worker against the session's
dev server; the runs are workflows recorded to a SQLite store. In Debian's Chromium a person
approves a wire on the page, a second run is cancelled from the CLI (``steadyrun runs
cancel``, which reaches the workflow through the engine) and the page shows it cancelled, and
a completed run is continued on the page with new input (a new turn on Temporal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from servekit import ARGS, CHROMIUM, TIMEOUT_MS, free_port

HERE = Path(__file__).parent
TOKEN = "host-token-2424"
PRINCIPAL = "alice"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

playwright_sync = pytest.importorskip("playwright.sync_api")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


class Host:
    """The serve process and the CLI commands of the test, on one store and task queue."""

    def __init__(self, server: Any, tmp: Path) -> None:
        self.tmp = tmp
        self.effects = tmp / "effects.txt"
        self.env = {
            **os.environ,
            "SERVE_DB": str(tmp / "runs.db"),
            "SERVE_EFFECTS": str(self.effects),
            "STEADYRUN_API_TOKENS": f"{PRINCIPAL}:{TOKEN}",
            "STEADYRUN_TEMPORAL_ADDRESS": server.target,
            "STEADYRUN_TASK_QUEUE": f"q-{uuid.uuid4().hex}",
            "PYTHONPATH": os.pathsep.join(
                [str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]
            ),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def steadyrun(self, *args: str, where: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "steadyrun", *args, "--app", "temporal_console_app:app"]
        env = dict(self.env)
        if not where:  # the command is not told where Temporal is
            del env["STEADYRUN_TEMPORAL_ADDRESS"]
        return subprocess.run(cmd, env=env, cwd=HERE, capture_output=True, text=True)

    def serve(self) -> str:
        port = free_port()
        cmd = [
            sys.executable, "-m", "steadyrun", "serve", "--app", "temporal_console_app:app",
            "--port", str(port), "--engine", "temporal",
        ]  # fmt: skip
        with (self.tmp / "serve.log").open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=self.env, cwd=HERE, stdout=log, stderr=log)
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                up = self.proc is not None and self.proc.poll() is None
                return up and httpx.get(f"{base}/health").status_code == 200
            except httpx.HTTPError:
                return False

        self.within(60, healthy, "serve answering")
        return base

    def log(self) -> str:
        path = self.tmp / "serve.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def within(self, seconds: float, ok: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + seconds
        while not ok():
            assert time.monotonic() < deadline, f"{what}: not within {seconds} s\n{self.log()}"
            time.sleep(0.1)

    def marks(self) -> list[str]:
        text = self.effects.read_text() if self.effects.exists() else ""
        return [line.split()[0] for line in text.splitlines()]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def host(temporal_server: Any, tmp_path: Path) -> Iterator[Host]:
    running = Host(temporal_server, tmp_path)
    try:
        yield running
    finally:
        running.close()


def test_the_page_and_the_cli_drive_temporal_runs(host: Host) -> None:
    base = host.serve()
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(base + "/")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.wait_for_selector(f'#who:has-text("signed in as {PRINCIPAL}")')

        def start(agent: str, text: str, run_id: str) -> None:
            page.select_option("#start-agent", agent)
            page.fill("#start-input", text)
            page.fill("#start-id", run_id)
            page.click("#start-go")
            page.wait_for_selector(f'#run-title:has-text("{run_id}")')

        # A wire waits for a person; approved on the page, it runs once and the run completes.
        start("wire", "Wire 20.", "wire-page")
        page.wait_for_selector("#run-status.suspended")
        item = page.locator("#pending .item.decision")
        item.locator("button.approve").click()
        item.wait_for(state="detached")
        page.wait_for_selector("#run-status.completed")
        page.wait_for_selector("#timeline li.content >> text=wired 20")
        assert host.marks() == ["wire20"]

        # Another wire is cancelled from the command line; the page shows it cancelled.
        start("wire", "Wire 30.", "wire-cli")
        page.wait_for_selector("#run-status.suspended")
        page.wait_for_selector("#pending .item.decision")
        lost = host.steadyrun("runs", "cancel", "wire-cli", where=False)
        assert lost.returncode == 2 and "STEADYRUN_TEMPORAL_ADDRESS" in lost.stderr, lost.stderr
        done = host.steadyrun("runs", "cancel", "wire-cli", "--json")
        assert done.returncode == 0, done.stderr + host.log()
        assert '"runs": ["wire-cli"]' in done.stdout, done.stdout
        page.wait_for_selector("#run-status.cancelled")
        page.wait_for_selector("#pending-box", state="hidden")
        again = host.steadyrun("runs", "cancel", "wire-cli")
        assert again.returncode == 0, again.stderr

        # A completed run is continued on the page: a new turn of the same run.
        start("chat", "Hello.", "chat-page")
        page.wait_for_selector("#run-status.completed")
        page.wait_for_selector("#timeline li.content >> text=turn 1: Hello.")
        assert page.locator("#message-send").inner_text() == "Continue"
        page.fill("#message-text", "And again.")
        page.click("#message-send")
        page.wait_for_selector(f"#message-msg:has-text('Sent by {PRINCIPAL}')")
        page.wait_for_selector("#timeline li.content >> text=turn 2: And again.")
        page.wait_for_selector("#run-status.completed")
        browser.close()

    assert host.marks() == ["wire20", "chat1", "chat2"]
    shown = httpx.get(f"{base}/runs/wire-cli", headers=AUTH).json()["data"]
    assert shown["status"] == "cancelled"
    assert "Traceback" not in host.log(), host.log()
