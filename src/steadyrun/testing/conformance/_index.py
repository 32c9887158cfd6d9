"""Checks of ``RunIndex.list_runs``: order, filters, limit, paging and summary fields."""

from __future__ import annotations

from typing import Any

from steadyrun.records import RunRecord
from steadyrun.stores import RunSummary, Store
from steadyrun.testing.conformance._expect import expect_equal
from steadyrun.testing.conformance._records import at, run_row, step
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS"]

CHECKS = CheckList("index")
"""The run index checks, in order."""


async def _save(store: Store, run_id: str, updated: int, **fields: Any) -> RunRecord:
    # Save a run whose last activity is ``updated`` seconds after T0.
    row = run_row(run_id, updated_at=at(updated), **fields)
    await store.save_step(run_id, step(run_id, run=row))
    return row


async def _runs(store: Store) -> list[RunRecord]:
    # Seven runs over two agents and three statuses, saved out of time order.
    plan: list[tuple[str, int, str, str]] = [
        ("r3", 30, "alpha", "completed"),
        ("r1", 10, "alpha", "running"),
        ("r6", 60, "beta", "suspended"),
        ("r2", 20, "beta", "completed"),
        ("r7", 70, "alpha", "failed"),
        ("r4", 40, "alpha", "suspended"),
        ("r5", 50, "beta", "completed"),
    ]
    return [
        await _save(
            store,
            run_id,
            updated,
            agent=agent,
            status=status,
            steps=updated // 10,
            created_at=at(updated - 5),
        )
        for run_id, updated, agent, status in plan
    ]


def _ids(summaries: list[RunSummary]) -> list[str]:
    return [s.run_id for s in summaries]


@CHECKS.rule("empty_store_lists_nothing")
async def empty_store_lists_nothing(store: Store) -> None:
    """``list_runs`` of a store without runs is empty."""
    expect_equal(await store.list_runs(), [], "list_runs of an empty store")


@CHECKS.rule("newest_first")
async def newest_first(store: Store) -> None:
    """``list_runs`` orders runs by ``updated_at``, newest first."""
    await _runs(store)
    expect_equal(
        _ids(await store.list_runs()),
        ["r7", "r6", "r5", "r4", "r3", "r2", "r1"],
        "list_runs order",
    )


@CHECKS.rule("summary_matches_run_row")
async def summary_matches_run_row(store: Store) -> None:
    """Each summary carries the run row's id, agent, status, times and step count."""
    rows = await _runs(store)
    expected = {
        r.run_id: RunSummary(
            run_id=r.run_id,
            agent=r.agent,
            status=r.status,
            created_at=r.created_at,
            updated_at=r.updated_at,
            steps=r.steps,
        )
        for r in rows
    }
    listed = {s.run_id: s for s in await store.list_runs()}
    expect_equal(listed, expected, "summaries by run id")


@CHECKS.rule("filters_by_status")
async def filters_by_status(store: Store) -> None:
    """``status=`` lists only runs with that status."""
    await _runs(store)
    expect_equal(_ids(await store.list_runs(status="completed")), ["r5", "r3", "r2"], "completed")
    expect_equal(_ids(await store.list_runs(status="running")), ["r1"], "running")
    await _save(store, "r8", 80, status="running")
    expect_equal(_ids(await store.list_runs(status="running")), ["r8", "r1"], "running, later")


@CHECKS.rule("filters_by_agent")
async def filters_by_agent(store: Store) -> None:
    """``agent=`` lists only that agent's runs, and combines with ``status=``."""
    await _runs(store)
    expect_equal(_ids(await store.list_runs(agent="beta")), ["r6", "r5", "r2"], "agent beta")
    expect_equal(
        _ids(await store.list_runs(agent="alpha", status="suspended")),
        ["r4"],
        "agent alpha, status suspended",
    )
    expect_equal(await store.list_runs(agent="gamma"), [], "an agent without runs")


@CHECKS.rule("limit")
async def limit(store: Store) -> None:
    """``limit=`` returns at most that many of the newest runs."""
    await _runs(store)
    expect_equal(_ids(await store.list_runs(limit=3)), ["r7", "r6", "r5"], "limit=3")
    expect_equal(_ids(await store.list_runs(limit=1, agent="beta")), ["r6"], "limit=1, beta")
    expect_equal(len(await store.list_runs(limit=100)), 7, "limit above the number of runs")


@CHECKS.rule("pages_with_updated_before")
async def pages_with_updated_before(store: Store) -> None:
    """Paging with ``updated_before`` set to the last ``updated_at`` lists every run once."""
    await _runs(store)
    pages: list[list[str]] = []
    before = None
    while len(pages) <= 7:
        page = await store.list_runs(limit=3, updated_before=before)
        if not page:
            break
        pages.append(_ids(page))
        before = page[-1].updated_at
    expect_equal(pages, [["r7", "r6", "r5"], ["r4", "r3", "r2"], ["r1"]], "pages of 3")
    expect_equal(
        _ids(await store.list_runs(updated_before=at(45), agent="alpha")),
        ["r4", "r3", "r1"],
        "alpha runs updated before T0+45 s",
    )


@CHECKS.rule("follows_latest_step")
async def follows_latest_step(store: Store) -> None:
    """A later step's run row moves the run in the listing and changes its summary."""
    await _runs(store)
    await _save(store, "r1", 75, agent="alpha", status="completed", steps=5)
    listed = await store.list_runs(limit=2)
    expect_equal(_ids(listed), ["r1", "r7"], "the newest runs after r1 saved again")
    expect_equal(
        (listed[0].status, listed[0].steps, listed[0].updated_at),
        ("completed", 5, at(75)),
        "r1's summary after its latest step",
    )
    expect_equal(_ids(await store.list_runs(status="running")), [], "running runs")
