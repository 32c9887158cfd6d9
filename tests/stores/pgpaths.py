"""The PostgreSQL store's two ways of writing a loop step, for tests that compare them.

A loop step goes out as one call of ``save_loop_step`` when the store knows what it assumes,
else by the general path (``_postgres_step``); ``general_path_only()`` sends every step the
general way, as before the function existed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from steadyrun.stores import _postgres


@contextmanager
def general_path_only() -> Iterator[None]:
    """Every step through the general path, as before ``save_loop_step``."""
    fast = _postgres.fast_step
    _postgres.fast_step = lambda *a, **k: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _postgres.fast_step = fast
