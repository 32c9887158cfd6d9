"""Publisher: dropping idle runs costs little when many runs execute at once.

The publisher keeps at most ``max_idle`` runs that neither execute here nor have followers.
Finding the least recently changed ones meant a look at every run it holds, executing ones
included, at each run's end, each follower's leaving and each new run: with a thousand runs
executing, a thousand looks per event. Each of those events leaves at most one more run idle,
so after a look that left ``k`` idle runs the next ``max_idle - k`` events need none.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator
from typing import Any

from steadyrun.stores import MemoryStore
from steadyrun.stream import Publisher

RUNNING = 1000


class Looks(dict[str, Any]):
    """The publisher's channels, counting the runs its scans look at."""

    looked = 0

    def items(self) -> ItemsView[str, Any]:
        outer = self

        class Counted(ItemsView[str, Any]):
            def __iter__(self) -> Iterator[tuple[str, Any]]:
                for pair in dict.items(outer):
                    outer.looked += 1
                    yield pair

        return Counted(self)


def idle(publisher: Publisher) -> list[str]:
    return [
        run_id for run_id, c in dict.items(publisher._channels) if not c.active and c.followers == 0
    ]


async def test_ending_many_runs_keeps_the_bound_and_looks_at_few_runs() -> None:
    publisher = Publisher(MemoryStore(), max_idle=200)
    looks = Looks()
    publisher._channels = looks
    for i in range(RUNNING):
        await publisher.run_started(f"r{i:04}", "a")
    for i in range(RUNNING):
        await publisher.on_run_end(f"r{i:04}", "completed")
        kept = idle(publisher)
        assert len(kept) <= 200, i
    # The bound holds after every end, and what is kept is the most recently ended.
    assert sorted(kept)[-1] == f"r{RUNNING - 1:04}"
    assert all(int(run_id[1:]) >= RUNNING - 200 for run_id in kept)
    # A look at every run at each end: ~RUNNING²/2 (the executing ones) plus the idle ones.
    assert looks.looked <= RUNNING * RUNNING // 20, looks.looked


async def test_a_bound_of_zero_or_one_still_drops_every_idle_run_beyond_it() -> None:
    for bound in (0, 1, 3):
        publisher = Publisher(MemoryStore(), max_idle=bound)
        for i in range(20):
            await publisher.run_started(f"r{i}", "a")
            await publisher.on_run_end(f"r{i}", "completed")
            assert len(idle(publisher)) <= bound
        assert sorted(idle(publisher)) == [f"r{i}" for i in range(20 - bound, 20)]
