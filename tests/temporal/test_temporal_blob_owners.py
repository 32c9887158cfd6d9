"""Owned blob stores without a server: shared blobs, references newer than the cutoff."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import asyncio  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

from steadyrun.temporal import FolderBlobs, OwnedBlobStore, SqliteBlobs  # noqa: E402

DATA = b"x" * 1000
KEY = hashlib.sha256(DATA).hexdigest()


def stores(tmp: Path) -> list[OwnedBlobStore]:
    return [FolderBlobs(tmp / "blobs"), SqliteBlobs(tmp / "blobs.db")]


@pytest.mark.parametrize("index", [0, 1])
async def test_a_shared_blob_goes_with_its_last_owner(tmp_path: Path, index: int) -> None:
    blobs = stores(tmp_path)[index]
    await blobs.put_owned(KEY, DATA, "run-a")
    await blobs.put_owned(KEY, DATA, "run-b/c1")
    assert await blobs.owners() == ["run-a", "run-b/c1"]
    later = datetime.now(UTC) + timedelta(seconds=5)
    assert await blobs.release("run-a", later) == 0
    assert await blobs.get(KEY) == DATA
    assert await blobs.release("run-b/c1", later) == 1
    assert await blobs.owners() == []
    with pytest.raises(KeyError):
        await blobs.get(KEY)
    # Written again after collection: stored again.
    await blobs.put_owned(KEY, DATA, "run-c")
    assert await blobs.get(KEY) == DATA


@pytest.mark.parametrize("index", [0, 1])
async def test_a_reference_newer_than_the_cutoff_stays(tmp_path: Path, index: int) -> None:
    blobs = stores(tmp_path)[index]
    await blobs.put_owned(KEY, DATA, "run-a")
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    assert await blobs.release("run-a", earlier) == 0  # the run wrote it after the cutoff
    assert await blobs.owners() == ["run-a"] and await blobs.get(KEY) == DATA


async def test_a_plain_put_owns_nothing_and_is_never_released(tmp_path: Path) -> None:
    blobs = SqliteBlobs(tmp_path / "blobs.db")
    await blobs.put(KEY, DATA)
    assert await blobs.owners() == []
    assert await blobs.release("anyone", datetime.now(UTC) + timedelta(days=1)) == 0
    assert await blobs.get(KEY) == DATA


def test_folder_markers_stay_out_of_the_blob_folders(tmp_path: Path) -> None:
    blobs = FolderBlobs(tmp_path / "blobs")
    blobs._put_owned(KEY, DATA, "run-a")
    names = sorted(os.listdir(tmp_path / "blobs"))
    assert names == [".owners", ".refs", KEY[:2]]


async def test_a_collectors_count_includes_what_it_deleted_before_its_pass_ends(
    tmp_path: Path,
) -> None:
    # A pass asks the cluster about each owner in turn; one it deleted is counted then, not
    # when the last owner has answered (a caller who saw the blobs go read a stale count).
    from temporalio.service import RPCError, RPCStatusCode

    from steadyrun.temporal import BlobCollector

    asked, answer = asyncio.Event(), asyncio.Event()

    class Handle:
        def __init__(self, workflow_id: str) -> None:
            self.workflow_id = workflow_id

        async def describe(self) -> None:
            if self.workflow_id == "slow":
                asked.set()
                await answer.wait()
            raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")

    class FakeClient:
        def get_workflow_handle(self, workflow_id: str) -> Handle:
            return Handle(workflow_id)

    blobs = FolderBlobs(tmp_path / "blobs")
    await blobs.put_owned(KEY, DATA, "gone")
    await blobs.put_owned(hashlib.sha256(b"y").hexdigest(), b"y", "slow")
    collector = BlobCollector(
        FakeClient(),  # type: ignore[arg-type]
        blobs,
        every=timedelta(hours=1),
        grace=timedelta(0),
    )
    async with collector:
        try:
            await asyncio.wait_for(asked.wait(), 30)
            assert await blobs.owners() == ["slow"]
            assert collector.collected == 1 and collector.passes == 0
        finally:
            answer.set()  # the collector stops after the pass under way
        for _ in range(300):
            if collector.passes:
                break
            await asyncio.sleep(0.01)
    assert collector.passes == 1 and collector.collected == 2
    assert await blobs.owners() == []
