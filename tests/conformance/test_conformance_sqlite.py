"""Every rule of the store contracts, on SqliteStore (a new file per check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyrun.stores import SqliteStore
from steadyrun.testing.conformance import CHECKS, factory_from, run_check


@pytest.mark.parametrize("check", CHECKS)
async def test_sqlite_store_conformance(check: str, tmp_path: Path) -> None:
    await run_check(check, factory_from(lambda: SqliteStore(tmp_path / "runs.db")))
