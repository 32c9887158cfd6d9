"""A run's ``consume`` (its input marked delivered once it ended) commits without an fsync.

The runtime's final step already holds, durably, how far the run claimed its feed
(``claimed_through`` in its checkpoint); the ``feed_state`` boundary only tells the worker that
nothing waits. A machine crash that loses it leaves a finished run that looks as if input
waited: its next execution claims nothing above ``claimed_through`` and consumes again (the
"crash before it" path of ``Runtime._resume``). So the mark needs no fsync of its own: one fewer
per run and per turn, on the service's path as in the library.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import countkit
import steadyrun as sr
from steadyrun.stores import FeedMessage
from steadyrun.testing import FunctionModel, text


def _agent(asked: list[int]) -> sr.Agent:
    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        asked.append(1)
        return text("done")

    return sr.Agent(name="a", model=FunctionModel(respond, name="fake"))


async def test_consume_alone_commits_unsynced(tmp_path: Path) -> None:
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(tmp_path / "runs.db") as store:
            await store.append("r", FeedMessage(id="m1", role="user", content="hi"))
            counter.start()
            await store.consume("r", 1)
            counter.stop()
            assert await store.pending("r", 0) == 0
    assert (counter.counts.commits, counter.counts.synced_commits) == (1, 0)


async def test_a_lost_consume_is_redone_and_the_run_is_not_asked_again(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asked: list[int] = []
    async with sr.SqliteStore(path) as store:
        result = await sr.Runtime(store).run(_agent(asked), run_id="r", input="hi")
        assert result.status == "completed" and asked == [1]
    # A crash of the machine lost the unsynced mark (and the release after it).
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM feed_state WHERE run_id = 'r'")
    async with sr.SqliteStore(path) as store:
        assert await store.pending("r", 0) == 1  # looks as if input waited
        again = await sr.Runtime(store, agents=[_agent(asked)]).resume("r")
        assert again.status == "completed" and again.text == "done"
        assert asked == [1]  # the input was not taken again
        assert await store.pending("r", 0) == 0
        snap = await store.load("r")
        assert snap is not None and len(snap.context) == 2


async def test_a_completed_runs_final_step_marks_its_input_consumed(tmp_path: Path) -> None:
    """The final step's transaction holds the mark, so the runtime's ``consume`` right after it
    finds nothing to write: one commit (and one wait for it) fewer at the end of every run."""
    asked: list[int] = []
    with countkit.counting("sqlite") as counter:
        async with sr.SqliteStore(tmp_path / "runs.db") as store:
            result = await sr.Runtime(store).run(_agent(asked), run_id="r", input="hi")
            assert result.status == "completed"
            assert await store.pending("r", 0) == 0
            counter.start()
            await store.consume("r", 1)  # what the runtime did: already marked, no write
            counter.stop()
            # Input that came after the claim is still waiting: the mark stops at the claim.
            await store.append("r", FeedMessage(id="m2", role="user", content="more"))
            assert await store.pending("r", 0) == 2
    assert counter.counts.commits == 0, counter.counts.statement_log


async def test_a_failed_runs_step_marks_nothing(tmp_path: Path) -> None:
    def broken(request: sr.ModelRequest) -> sr.ModelResponse:
        raise ValueError("the model broke")

    agent = sr.Agent(name="a", model=FunctionModel(broken, name="fake"))
    async with sr.SqliteStore(tmp_path / "runs.db") as store:
        result = await sr.Runtime(store).run(agent, run_id="r", input="hi")
        assert result.status == "failed"
        assert await store.pending("r", 0) == 1  # as before: a failed run leaves it
