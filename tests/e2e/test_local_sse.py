"""The local llama.cpp model's answer reaches an SSE client fragment by fragment (issue 21).

A real GGUF model (the packaged Gemma 3 270M) answers in an App served by uvicorn; an SSE client
on ``GET /runs/{id}/stream`` sees the words as text fragments before the run completes, and the
fragments fold to the stored answer. Marked local_model (see tests/e2e/local_support.py).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from local_support import require_llama

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "service"))
from servicekit import AUTH, TOKEN  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import steadyrun as sr  # noqa: E402
from servekit import serving  # noqa: E402
from steadyrun.service import App, create_app  # noqa: E402
from steadyrun.stores import MemoryStore  # noqa: E402
from steadyrun.stream import (  # noqa: E402
    apply,
    delta_from_json,
    snapshot_from_json,
    snapshot_from_store,
)

pytestmark = pytest.mark.local_model
uvicorn = pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, App]]:
    require_llama()
    from steadyrun.models import allow_model_requests
    from steadyrun.models.local import LocalModel

    allow_model_requests(True)  # a local model: nothing leaves this machine

    model = LocalModel(temperature=0)
    agent = sr.Agent(
        name="poet",
        model=model,
        instructions="You answer in two or three full sentences.",
    )
    app = App(MemoryStore(), agents=[agent])
    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=0.5)
    with serving(api, lifespan="on") as base:
        yield base, app
    model.close()
    allow_model_requests(False)


def test_a_local_models_answer_streams_to_an_sse_client(served: tuple[str, App]) -> None:
    base, app = served
    body = {"run_id": "p1", "agent": "poet", "input": "Write a short poem about the sea."}
    assert httpx.post(f"{base}/runs", json=body, headers=AUTH).status_code == 202
    snap = None
    growth: list[str] = []  # the live block's text after each event, while the run ran
    url = f"{base}/runs/p1/stream?until=done"
    with httpx.stream("GET", url, headers=AUTH, timeout=300) as response:
        kind, data = "message", ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif line == "" and data:
                if kind == "snapshot":
                    snap = snapshot_from_json(data)
                else:
                    assert snap is not None
                    delta = delta_from_json(data)
                    snap = apply(snap, delta)
                    live = [b.text for b in snap.blocks if b.live and b.kind == "content"]
                    if live and snap.status == "running":
                        growth.append(live[0])
                kind, data = "message", ""
    assert snap is not None and snap.status == "completed", snap.error if snap else None
    assert len(set(growth)) >= 3, f"the answer came in pieces while the run ran: {growth}"
    assert all(
        later.startswith(earlier) for earlier, later in zip(growth, growth[1:], strict=False)
    )
    stored = asyncio.run(snapshot_from_store(app.store, "p1"))
    assert snap.blocks == stored.blocks and not any(b.live for b in snap.blocks)
    assert snap.text and growth[-1].strip() == snap.text.strip()
