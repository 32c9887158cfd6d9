"""The shared listing filter: its Python rule and its SQL say the same thing."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from steadyrun.records import RunRecord
from steadyrun.stores._listing import LISTED_COLUMNS, RunFilter, record_summary, summary_of

T0 = datetime(2024, 1, 1, tzinfo=UTC)
times = st.one_of(st.none(), st.integers(0, 5).map(lambda n: T0 + timedelta(seconds=n)))
runs = st.builds(
    RunRecord,
    run_id=st.uuids().map(str),
    agent=st.sampled_from(["a", "b"]),
    status=st.sampled_from(["running", "completed", "failed"]),
    created_at=st.just(T0),
    updated_at=times,
)
filters = st.builds(
    RunFilter,
    status=st.sampled_from([None, "running", "completed"]),
    agent=st.sampled_from([None, "a", "b"]),
    updated_before=times,
)


def us(value: datetime | None) -> int | None:
    return None if value is None else int((value - T0).total_seconds() * 1_000_000)


def dt(value: int | None) -> datetime | None:
    return None if value is None else T0 + timedelta(microseconds=value)


@given(records=st.lists(runs, max_size=6), wanted=filters)
def test_the_sql_lists_the_runs_the_python_rule_admits(
    records: list[RunRecord], wanted: RunFilter
) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE runs (run_id TEXT, agent TEXT, status TEXT, created_us INTEGER,"
        " updated_us INTEGER, steps INTEGER)"
    )
    for r in records:
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?)",
            (r.run_id, r.agent, r.status, us(r.created_at), us(r.updated_at), r.steps),
        )
    where, args = wanted.where("?", us)
    rows = conn.execute(f"SELECT {LISTED_COLUMNS} FROM runs{where}", args).fetchall()
    listed = sorted((summary_of(row, dt) for row in rows), key=lambda s: s.run_id)
    admitted = sorted(
        (record_summary(r) for r in records if wanted.admits(r)), key=lambda s: s.run_id
    )
    assert listed == admitted


def test_no_filter_is_no_where_clause() -> None:
    assert RunFilter().where("%s", us) == ("", [])
