"""``run_demo`` (for ``steadyrun demo --engine temporal``) tells its story and its checks hold."""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

from pathlib import Path  # noqa: E402

from steadyrun.temporal._demo import run_demo  # noqa: E402


async def test_demo_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    assert await run_demo(db=tmp_path / "demo.db", out=lines.append) == 0
    assert "Refunds that really ran: 1" in lines
    assert any(line.startswith("Run completed: ") for line in lines)


async def test_the_demo_asks_again_when_temporal_did_not_take_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision or result Temporal did not take (UNAVAILABLE) is asked again, as the error
    says to: a repeated decision or result changes nothing. Seen once in CI: the dev server's
    frontend refused one connection under load and the demo failed on its first try."""
    from steadyrun._errors import EngineUnavailableError
    from steadyrun.temporal._client import TemporalRuns

    failed: list[str] = []
    for name in ("decide", "settle"):
        real = getattr(TemporalRuns, name)

        def once(real=real, name=name):  # type: ignore[no-untyped-def]
            async def flaky(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                if name not in failed:
                    failed.append(name)
                    raise EngineUnavailableError("tcp connect error (a fake)", "UNAVAILABLE")
                return await real(self, *args, **kwargs)

            return flaky

        monkeypatch.setattr(TemporalRuns, name, once())
    lines: list[str] = []
    assert await run_demo(db=tmp_path / "demo.db", out=lines.append) == 0
    assert sorted(failed) == ["decide", "settle"]
    assert "Refunds that really ran: 1" in lines
    assert sum("asking again" in line for line in lines) == 2


async def test_a_dead_dev_server_is_named_with_its_log() -> None:
    from steadyrun.temporal._devserver import DevServer, DevServerError

    async with DevServer() as server:
        assert server.exited() is None
        assert server._process is not None
        server._process.kill()
        server._process.wait()
        with pytest.raises(DevServerError, match="exited with -9"):
            server.check()
