"""The model's words reach an SSE client and the web page as they are written (issue 21).

A writer agent's fake model streams 200 words 5 ms apart (after a pause that lets the client
join). The SSE client sees text fragments before the run completes, resumes exactly after a
disconnect with ``Last-Event-ID``, and folds to the stored run; the page, in headless
Chromium, grows the text in place (one element, more text) before the run completes.
Latency figures are printed, never asserted: benchmarks/stream_fanout.py measures them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from servicekit import AUTH, TOKEN

from servekit import ARGS, CHROMIUM, TIMEOUT_MS, serving
from steadyrun.service import App, create_app
from steadyrun.stores import MemoryStore
from steadyrun.stream import apply, delta_from_json, snapshot_from_json, snapshot_from_store
from streamkit import SlowStreamingModel, writer_agent

playwright_sync = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")

WORDS = 200


@pytest.fixture
def served() -> Iterator[tuple[str, App, SlowStreamingModel]]:
    # The pause covers a browser starting and the page signing in (its modules, who, the
    # lists) before the model writes: only a call that starts with a follower is streamed.
    agent = writer_agent(WORDS, 0.005, 3.0)
    app = App(MemoryStore(), agents=[agent])
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=0.5)
    assert isinstance(agent.model, SlowStreamingModel)
    with serving(api, lifespan="on") as base:
        yield base, app, agent.model


def _events(response: httpx.Response) -> Iterator[tuple[float, str, str, Any]]:
    """(arrival time, kind, id, payload) of each SSE event."""
    kind, ident, data = "message", "", ""
    for line in response.iter_lines():
        if line == "":
            if data:
                yield time.time(), kind, ident, json.loads(data)
            kind, ident, data = "message", "", ""
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()


def _start(base: str, run_id: str) -> None:
    body = {"run_id": run_id, "agent": "writer", "input": "write"}
    assert httpx.post(f"{base}/runs", json=body, headers=AUTH).status_code == 202


def test_an_sse_client_sees_the_words_as_written_and_resumes_exactly(
    served: tuple[str, App, SlowStreamingModel],
) -> None:
    base, app, model = served
    _start(base, "w1")
    snap = None
    fragments: list[float] = []
    last_id = ""
    with httpx.stream("GET", f"{base}/runs/w1/stream", headers=AUTH, timeout=60) as response:
        for at, kind, ident, payload in _events(response):
            if kind == "snapshot":
                snap = snapshot_from_json(json.dumps(payload))
            else:
                assert snap is not None
                delta = delta_from_json(json.dumps(payload))
                snap = apply(snap, delta)
                if payload["data"]["kind"] == "text_fragment":
                    fragments.append(at)
            last_id = ident
            if len(fragments) >= 30:
                break  # a dropped connection, mid-stream
    assert snap is not None and snap.status == "running"
    assert any(b.live and b.text.startswith("w0 w1 w2") for b in snap.blocks)
    # Reconnect: the deltas after the last one seen, nothing missed, nothing twice.
    headers = {**AUTH, "Last-Event-ID": last_id}
    url = f"{base}/runs/w1/stream?until=done"
    with httpx.stream("GET", url, headers=headers, timeout=60) as response:
        for _at, kind, _ident, payload in _events(response):
            assert kind == "delta", "resumed with deltas, not a fresh snapshot"
            snap = apply(snap, delta_from_json(json.dumps(payload)))
            if payload["data"]["kind"] == "text_fragment":
                fragments.append(_at)
    assert snap.status == "completed"
    assert len(fragments) >= 50, "the words came one by one"
    assert fragments[0] < model.produced[-1], "the first words arrived before the last was written"
    print(
        f"\nfirst fragment {1000 * (fragments[0] - model.produced[0]):.1f} ms after it was written"
    )
    import asyncio

    stored = asyncio.run(snapshot_from_store(app.store, "w1"))
    assert snap.blocks == stored.blocks and snap.text == stored.text
    assert not any(b.live for b in snap.blocks)


WATCH_JS = """
() => {
  window.__growth = [];
  const list = document.getElementById("timeline");
  const look = () => {
    const live = list.querySelector("li.live .text");
    if (live) {
      if (!live.dataset.mark) live.dataset.mark = String(window.__growth.length);
      window.__growth.push([live.dataset.mark, live.textContent.length,
                            document.getElementById("run-status").textContent]);
    }
  };
  new MutationObserver(look).observe(list, {subtree: true, childList: true, characterData: true});
}
"""


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")
def test_the_page_grows_the_text_in_place_before_the_run_completes(
    served: tuple[str, App, SlowStreamingModel], tmp_path: Path
) -> None:
    base, _app, _model = served
    _start(base, "w2")
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1180, "height": 820})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(base + "/")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        page.click('#runs li[data-run="w2"]')
        page.wait_for_selector("#run-status")
        page.evaluate(WATCH_JS)
        page.wait_for_selector("#timeline li.live")
        shots = Path(os.environ.get("STEADYRUN_SCREENSHOTS", str(tmp_path)))
        page.screenshot(path=str(shots / "service-streaming.png"))
        page.wait_for_selector("#run-status.completed")
        growth = page.evaluate("window.__growth")
        final = page.inner_text("#timeline li.content")
        browser.close()
    lengths = [n for _mark, n, status in growth if status == "running"]
    assert len(set(lengths)) >= 10, "the text grew many times while the run was running"
    assert lengths == sorted(lengths), "it only grew"
    assert len({mark for mark, _n, _s in growth}) == 1, "one element, grown in place"
    assert final.strip() == "".join(f"w{i} " for i in range(WORDS)).strip()
