"""Large payloads by reference: a 3 MB tool result completes; the history keeps references."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import functools  # noqa: E402
import hashlib  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from google.protobuf.message import Message as Proto  # noqa: E402
from temporalio.api.common.v1 import Payload  # noqa: E402
from test_temporal_engine import connect  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest, ModelResponse  # noqa: E402
from steadyrun.temporal import (  # noqa: E402
    FolderBlobs,
    LargePayloadCodec,
    SqliteBlobs,
    TemporalApp,
    TemporalOptions,
)
from steadyrun.temporal._blobs import REF_ENCODING, ZLIB_ENCODING  # noqa: E402
from steadyrun.testing import FunctionModel, text, tool_calls  # noqa: E402

SIZE = 3 * 1024 * 1024


@functools.cache
def big_text() -> str:
    """3 MB of text that does not compress below the threshold (hex of a hash chain)."""
    out, block = [], b"seed"
    for _ in range(SIZE // 64 + 1):
        block = hashlib.sha256(block).digest()
        out.append(block.hex())
    return "".join(out)[:SIZE]


# The whole result reaches the model: the point is that it travels by reference, not its size.
@sr.tool(concurrency_key="", max_result_chars=None)
def export_logs(day: str) -> str:
    """Export a day's logs.

    Args:
        day: The day.
    """
    return big_text()


def model(request: ModelRequest) -> ModelResponse:
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return tool_calls(("export_logs", {"day": "2024-05-01"}))
    content = "".join(getattr(p, "content", "") for p in results[-1].parts)
    return text(f"got {len(content)} characters")


def app_with(store: Path, queue: str, codec: LargePayloadCodec | None) -> TemporalApp:
    agent = sr.Agent(name="exporter", model=FunctionModel(model), tools=[export_logs])
    options = TemporalOptions(
        task_queue=queue,
        payload_codec=codec,
        retry_interval=timedelta(milliseconds=200),
        heartbeat_timeout=timedelta(seconds=2),
        tool_attempts=1,
    )
    return TemporalApp(agents=[agent], store=sr.SqliteStore(store), options=options)


def payloads(message: Proto) -> Iterator[Payload]:
    """Every ``Payload`` inside a history event, however deep."""
    if isinstance(message, Payload):
        yield message
        return
    for _, value in message.ListFields():
        items = value if isinstance(value, list | tuple) or hasattr(value, "extend") else [value]
        if hasattr(value, "values") and hasattr(value, "keys"):
            items = list(value.values())
        for item in items:
            if isinstance(item, Proto):
                yield from payloads(item)


@pytest.mark.parametrize("blobs", ["folder", "sqlite"])
async def test_a_3mb_tool_result_travels_by_reference(
    temporal_server: Any, tmp_path: Path, blobs: str
) -> None:
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    store_path = tmp_path / "runs.db"
    # The blob table may live in the steadyrun store's own SQLite file.
    blob_store = FolderBlobs(tmp_path / "blobs") if blobs == "folder" else SqliteBlobs(store_path)
    app = app_with(store_path, queue, LargePayloadCodec(blob_store))
    runs = app.runs(client)
    async with app.worker(client):
        handle = await runs.start("exporter", run_id="export-1", input="Export May 1st.")
        out = await handle.result()
        history = await handle.fetch_history()
    assert out.status == "completed"
    assert out.text == f"got {SIZE} characters"

    sizes = [p.ByteSize() for e in history.events for p in payloads(e)]
    encodings = [p.metadata.get("encoding") for e in history.events for p in payloads(e)]
    assert max(sizes) < 128 * 1024  # nothing large stayed in the history
    # The result, the model's request and the record carrying it are references.
    assert encodings.count(REF_ENCODING) >= 3
    assert ZLIB_ENCODING in encodings  # mid-sized payloads are compressed in place

    store = sr.SqliteStore(store_path)
    snap = await store.load("export-1")
    await store.close()
    assert snap is not None
    (call,) = snap.calls
    assert call.status == "succeeded" and call.result == big_text()

    # The history replays: the replayer decodes the references with the app's codec.
    await app.replayer().replay_workflow(history)


async def test_without_the_codec_the_result_never_reaches_the_workflow(
    temporal_server: Any, tmp_path: Path
) -> None:
    """Temporal refuses the 3 MB completion (its 2 MB payload limit)."""
    client = await connect(temporal_server)
    queue = f"q-{uuid.uuid4().hex}"
    app = app_with(tmp_path / "runs.db", queue, None)
    async with app.worker(client):
        out = await app.runs(client).run("exporter", run_id="export-2", input="Export May 1st.")
    store = sr.SqliteStore(tmp_path / "runs.db")
    snap = await store.load("export-2")
    await store.close()
    assert snap is not None
    (call,) = snap.calls
    # The refused completion looks like a lost worker: the call did not succeed.
    print("STATUS", call.status, call.result)
    assert call.status != "succeeded" and call.result is not None and len(call.result) < SIZE
    assert out.status == "completed" and out.text != f"got {SIZE} characters"
