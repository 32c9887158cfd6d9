"""Tasks read back from the records list in the order they started, as on the built-in engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from steadyrun.background import Task
from steadyrun.temporal._taskrecords import in_start_order

T0 = datetime(2026, 12, 6, tzinfo=UTC)


def task(call_id: str, created: datetime | None) -> Task:
    return Task(
        id=f"r/{call_id}",
        run_id="r",
        call_id=call_id,
        tool="build",
        arguments="{}",
        created_at=created,
    )


def test_tasks_recorded_in_the_order_they_ended_list_in_the_order_they_started() -> None:
    # c2 ended (and was written) first; both started from one response, at one instant.
    recorded = [task("m1.c2", T0), task("m1.c10", T0), task("m1.c1", T0), task("m0.c3", T0)]
    later = task("m2.c1", T0 + timedelta(seconds=1))
    listed = in_start_order([later, *recorded])
    assert [t.call_id for t in listed] == ["m0.c3", "m1.c1", "m1.c2", "m1.c10", "m2.c1"]


def test_provider_call_ids_and_missing_times_still_give_one_order() -> None:
    tasks = [task("toolu_b", T0), task("toolu_a", T0), task("call_x", None)]
    assert [t.call_id for t in in_start_order(tasks)] == ["toolu_a", "toolu_b", "call_x"]
    assert in_start_order(list(reversed(tasks))) == in_start_order(tasks)
