"""The batch start rule (``next_start``) as properties, and whole batches played out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from steadyrun.runtime._batch import next_start

# None: runs alone; "": no key; "a".."c": keys that exclude each other's namesakes.
keys = st.one_of(st.none(), st.sampled_from(["", "a", "b", "c"]))
queues = st.lists(keys, max_size=8)
limits = st.integers(min_value=1, max_value=4)


def startable(key: str | None, running: list[str | None], limit: int) -> bool:
    """Whether a call with ``key`` may run beside ``running``, judged call by call."""
    if len(running) >= limit or None in running:
        return False
    if key is None:
        return not running
    return not (key and key in running)


@given(waiting=queues, running=st.lists(keys, max_size=4), limit=limits)
def test_the_chosen_call_may_start_and_nothing_before_it_may(
    waiting: list[str | None], running: list[str | None], limit: int
) -> None:
    chosen = next_start(waiting, running, limit)
    if chosen is None:
        # Nothing may start: every call up to the first one running alone is blocked.
        for key in waiting:
            assert not startable(key, running, limit)
            if key is None:
                break
        return
    assert startable(waiting[chosen], running, limit)
    for key in waiting[:chosen]:  # only calls blocked by their key are passed over
        assert key, f"passed over a call with key {key!r}"
        assert key in running


@given(waiting=queues, limit=limits)
def test_an_idle_batch_starts_its_first_call(waiting: list[str | None], limit: int) -> None:
    assert next_start(waiting, [], limit) == (0 if waiting else None)


@given(
    waiting=queues,
    limit=limits,
    ends=st.lists(st.integers(min_value=0, max_value=7), max_size=64),
)
def test_a_batch_played_out_runs_every_call_once_and_never_breaks_a_rule(
    waiting: list[str | None], limit: int, ends: list[int]
) -> None:
    queue = list(enumerate(waiting))
    running: list[tuple[int, str | None]] = []
    started: list[int] = []
    picks = iter(ends)
    while queue or running:
        while (i := next_start([k for _, k in queue], [k for _, k in running], limit)) is not None:
            call = queue.pop(i)
            assert startable(call[1], [k for _, k in running], limit)
            running.append(call)
            started.append(call[0])
        assert running, "a waiting call that can never start"
        # Any running call may end next; hypothesis picks which.
        running.pop(next(picks, 0) % len(running))
    assert sorted(started) == list(range(len(waiting)))
    # A call running alone starts after every call before it.
    for n, (index, key) in enumerate((i, waiting[i]) for i in started):
        if key is None:
            assert set(started[:n]) == set(range(index))
