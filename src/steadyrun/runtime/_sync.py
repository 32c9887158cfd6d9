"""``run_sync``: the one synchronous entry point, for scripts and notebooks without a loop."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine
from typing import Any, TypeVar

from steadyrun._errors import UsageError

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a steadyrun coroutine to completion from synchronous code.

    ``run_sync(runtime.run(agent, run_id="t-1", input="Hi"))``. Refuses to run inside a running
    event loop (await the coroutine there instead).
    """
    if not inspect.iscoroutine(coro):
        raise UsageError(
            f"run_sync() takes a coroutine such as runtime.run(...), got {type(coro).__name__}"
        )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        result: T = asyncio.run(coro)
        return result
    coro.close()
    raise UsageError(
        "run_sync() cannot be used inside a running event loop; await the call instead"
    )
