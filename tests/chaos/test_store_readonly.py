"""The SQLite store's directory becomes read-only mid-run: a typed error, then a clean resume.

How the directory is made read-only, for real: ``chmod`` the directory to ``0555`` and the
database, ``-wal`` and ``-shm`` files to ``0444``, as an operator would. That alone stops
nothing here: the tests run as root, whom permission bits do not bind, and no permission
change revokes a descriptor opened before it (the store holds one connection open). What
the kernel does enforce on open descriptors, for root too, is the immutable attribute
(``FS_IMMUTABLE_FL``, what ``chattr +i`` sets; setting it needs ``CAP_LINUX_IMMUTABLE``): a
write to an immutable file fails with ``EPERM`` and no file can be created in an immutable
directory, as on a file system remounted read-only after an error. So the test sets it on the
directory and the three files, mid-run, from inside a tool body, and clears it afterwards.
Where the attribute cannot be set (a file system without it, no capability), the test skips
and says why.

A second test opens the store in a read-only directory from a new process that is not root
(a child forked and switched to ``nobody`` when the tests run as root): plain ``chmod`` is
real there. PostgreSQL connections dropped mid-transaction are covered in
``tests/stores/test_store_failures.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pwd
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.chat import ToolResultPart
from steadyrun.control import await_external
from steadyrun.records import RunSnapshot
from steadyrun.testing import FunctionModel, text, tool_calls

N = 6
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IMMUTABLE_FL = 0x10


def set_immutable(path: Path, on: bool) -> None:
    """Set or clear ``FS_IMMUTABLE_FL`` on a file or directory (``chattr +i`` / ``-i``)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))
        flags = struct.unpack_from("i", buf)[0]
        flags = flags | FS_IMMUTABLE_FL if on else flags & ~FS_IMMUTABLE_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags) + bytes(4))
    finally:
        os.close(fd)


def store_files(folder: Path) -> list[Path]:
    """The database and its WAL files, then the directory."""
    files = [p for p in sorted(folder.iterdir()) if p.name.startswith("runs.db")]
    return [*files, folder]


def make_read_only(folder: Path) -> None:
    """``chmod a-w`` the directory and the store's files, and (as root) make them immutable."""
    for path in store_files(folder):
        path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() == 0:
        for path in store_files(folder):
            set_immutable(path, True)


def make_writable(folder: Path) -> None:
    """Undo ``make_read_only``."""
    for path in store_files(folder):
        with contextlib.suppress(OSError):
            set_immutable(path, False)
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The store's directory, left writable whatever the test did (so pytest can delete it)."""
    folder = tmp_path / "store"
    folder.mkdir()
    probe = folder / "probe"
    probe.touch()
    try:
        set_immutable(probe, True)
        set_immutable(probe, False)
    except OSError as exc:
        if os.geteuid() == 0:
            pytest.skip(f"cannot set the immutable attribute here ({exc}); see the docstring")
    probe.unlink()
    yield folder
    make_writable(folder)


def loop_model() -> FunctionModel:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        done = sum(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts)
        if done >= N:
            return text(f"charged {done} times")
        return tool_calls(("charge", {"n": done}))

    return FunctionModel(respond)


async def test_directory_read_only_mid_run_then_resume(folder: Path) -> None:
    db = folder / "runs.db"
    store = sr.SqliteStore(db)
    effects: list[int] = []
    before: list[sr.CallRecord] = []
    saved = None

    @sr.tool(side_effects=True)
    async def charge(n: int) -> str:
        """Charge once; during the third charge the directory becomes read-only."""
        nonlocal saved
        effects.append(n)
        if n == 2 and saved is None:
            saved = await store.load("r")
            make_read_only(folder)
        return f"charge {n} done"

    billing = sr.Agent(name="billing", model=loop_model(), tools=[charge])
    with pytest.raises(sr.StoreError) as failure:
        await sr.Runtime(store).run(billing, run_id="r", input="bill")
    # SQLite's write to the open WAL file fails with EPERM: "disk I/O error".
    assert "SQLite store" in str(failure.value), failure.value
    assert saved is not None
    before = saved.calls
    make_writable(folder)
    with contextlib.suppress(sr.StoreError):
        await store.close()  # the process would exit here

    async with sr.SqliteStore(db) as reopened:  # a new process, the directory writable again
        snap = await reopened.load("r")
        assert snap is not None and snap.run.status == "running"
        assert snap == saved, "the failed write changed what was stored"
        assert len(snap.context) == snap.checkpoint.context_length
        assert [c.status for c in before][-1] == "running"  # charge 2's start was saved
        result = await sr.Runtime(reopened).resume("r", agent=billing)
    assert result.status == "completed" and result.text == f"charged {N} times"
    assert sorted(effects) == list(range(N))  # charge 2 ran once; its lost result: needs_review
    assert [c.status for c in result.calls].count("needs_review") == 1


def _as_nobody_resume(db: Path, effects: Path, report: int) -> int:
    """In a forked child as ``nobody``: resume the run in the read-only directory.

    Writes the error to the ``report`` descriptor. Exit code 0: the resume raised
    ``StoreError``; 1: it did not; 2: anything else.
    """
    user = pwd.getpwnam("nobody")
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)

    async def go() -> int:
        store = sr.SqliteStore(db)
        try:
            await sr.Runtime(store).resume("r", agent=counted_agent(effects))
        except sr.StoreError as exc:
            os.write(report, str(exc).encode())
            return 0
        finally:
            with contextlib.suppress(sr.StoreError):
                await store.close()
        return 1

    return asyncio.run(go())


def counted_agent(effects: Path, suspend_at: int | None = None) -> sr.Agent:
    @sr.tool(side_effects=True)
    def charge(n: int) -> str:
        """Charge once (awaited, at ``suspend_at``)."""
        with effects.open("a") as f:
            f.write(f"{n}\n")
        if n == suspend_at:
            await_external({"n": n})
        return f"charge {n} done"

    return sr.Agent(name="billing", model=loop_model(), tools=[charge])


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory ``nobody`` can reach (pytest's ``tmp_path`` is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="steadyrun-readonly-"))
    base.chmod(0o755)
    (base / "store").mkdir()
    try:
        yield base
    finally:
        make_writable(base / "store")
        shutil.rmtree(base)


def test_directory_read_only_for_a_new_process_then_resume(shared: Path) -> None:
    # Synchronous: the child is forked outside any event loop.
    folder = shared / "store"
    db, effects = folder / "runs.db", shared / "effects.txt"
    effects.touch()
    effects.chmod(0o666)

    async def start() -> RunSnapshot | None:
        async with sr.SqliteStore(db) as store:
            runtime = sr.Runtime(store)
            result = await runtime.run(counted_agent(effects, 2), run_id="r", input="bill")
            assert result.status == "suspended"
            pending = await runtime.pending("r")
            await runtime.settle("r", pending[0].call_id, result="charge 2 done")
            return await store.load("r")

    saved = asyncio.run(start())
    if os.geteuid() == 0:  # the store's files belong to nobody, who may not write them now
        for path in store_files(folder):
            os.chown(path, pwd.getpwnam("nobody").pw_uid, -1)
    for path in store_files(folder):
        path.chmod(0o555 if path.is_dir() else 0o444)

    if os.geteuid() == 0:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 2
            try:
                os.close(read)
                code = _as_nobody_resume(db, effects, write)
            finally:
                os._exit(code)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read) as pipe:
            error = pipe.read()
        assert os.waitstatus_to_exitcode(status) == 0, "the read-only resume did not fail typed"
    else:  # not root: chmod binds this process already
        with pytest.raises(sr.StoreError) as failure:
            sr.run_sync(sr.Runtime(sr.SqliteStore(db)).resume("r", agent=counted_agent(effects)))
        error = str(failure.value)
    assert "readonly" in error or "read-only" in error or "unable to open" in error, error

    make_writable(folder)

    async def finish() -> sr.RunResult:
        async with sr.SqliteStore(db) as store:
            assert await store.load("r") == saved, "the refused resume changed what was stored"
            return await sr.Runtime(store).resume("r", agent=counted_agent(effects))

    result = asyncio.run(finish())
    assert result.status == "completed" and result.text == f"charged {N} times"
    ran = effects.read_text().split()
    assert sorted(ran) == sorted(str(n) for n in range(N)), ran  # nothing ran twice
