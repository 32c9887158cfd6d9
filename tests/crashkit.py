"""Shared helpers for runtime tests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from steadyrun import RunResult


async def crash_when(run: Coroutine[Any, Any, RunResult], crashed: asyncio.Event) -> None:
    """Run ``run`` until ``crashed`` is set, then drop it the way a killed process would."""
    task = asyncio.create_task(run)
    waiter = asyncio.create_task(crashed.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        waiter.cancel()
        raise AssertionError(f"the run ended before the crash point: {task.result()}")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def hang() -> None:
    """Wait until cancelled."""
    await asyncio.Event().wait()
