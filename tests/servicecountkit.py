"""What one run of ``benchmarks/service.py``'s workload costs an ``App``, counted (not timed).

The SQLite counts come from ``countkit.counting``; see that module for what each one means.
Split from ``countkit`` (which counts the loop per iteration) to keep each kit under the
architecture test's 600 lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import steadyrun as sr
from countkit import Counts, _patched, counting
from steadyrun.testing import FunctionModel, call, text, tool_calls


@dataclass
class ServiceCounts:
    """Totals over ``runs`` runs of ``benchmarks/service.py``'s workload in an ``App``.

    ``counts`` holds the SQLite counts (``hops``: jobs handed to the SQLite thread,
    ``commits``: write transactions, ``synced_commits`` those with an fsync); ``loads`` the
    ``Store.load`` calls, each a whole run read and decoded; ``observer_copies`` the deep
    copies made for observers (one per observer and callback that gets copies), ``diffs`` the
    publisher's snapshot diffs, ``live_sent`` the messages put on the store's live feed.
    """

    runs: int = 0
    loads: int = 0
    observer_copies: int = 0
    diffs: int = 0
    live_sent: int = 0
    counts: Counts = field(default_factory=Counts)

    def per_run(self) -> dict[str, float]:
        """Every count divided by the runs, ``loads`` included."""
        n = max(1, self.runs)
        per = {k: v * self.counts.iterations / n for k, v in self.counts.per_iteration().items()}
        for name in ("loads", "observer_copies", "diffs", "live_sent"):
            per[name] = getattr(self, name) / n
        return per


def service_agent() -> sr.Agent:
    """The workload of ``benchmarks/service.py``: one ``work`` call, then a final text."""

    def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        if any(m.role == "tool" for m in request.messages):
            return text("done")
        return tool_calls(call("work", {"job": "j"}, id="call_work"))

    async def work(job: str) -> str:
        """Do a small job.

        Args:
            job: The job.
        """
        return f"did {job}"

    return sr.Agent(name="bench", model=FunctionModel(respond, name="svc"), tools=[sr.tool(work)])


async def count_service(
    path: Path, *, runs: int = 4, observers: Sequence[sr.Observer] = (), elsewhere: bool = False
) -> ServiceCounts:
    """Start ``runs`` runs one after another through an ``App`` on a SQLite file; count each.

    A run is counted from ``App.start`` to the moment its worker let it go (its claim
    released, its end published), so the app's worker, claims and publisher are all in.
    ``observers`` are registered with the app's runtime besides its own. ``elsewhere``: a
    follower here listens on the live feed for a run that another process executes.
    """
    from steadyrun.runtime import _observers
    from steadyrun.service import App
    from steadyrun.stores._live_open import live_feed
    from steadyrun.stream import _publisher

    out = ServiceCounts()
    with counting("sqlite") as counter, ExitStack() as stack:
        store = sr.SqliteStore(path)
        load = store.load

        def tally(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            def counted(*args: Any, **kwargs: Any) -> Any:
                if counter.active:
                    setattr(out, name, getattr(out, name) + 1)
                return fn(*args, **kwargs)

            return counted

        copier = SimpleNamespace(deepcopy=tally("observer_copies", _observers.copy.deepcopy))
        stack.enter_context(_patched(_observers, "copy", copier))
        stack.enter_context(_patched(_publisher, "diff", tally("diffs", _publisher.diff)))
        feed: Any = live_feed(store)
        feed.publish = tally("live_sent", feed.publish)
        if elsewhere:
            stack.callback((await feed.subscribe("elsewhere")).close)

        async def counted_load(run_id: str) -> Any:
            if counter.active:
                out.loads += 1
            return await load(run_id)

        store.load = counted_load  # type: ignore[method-assign]
        app = App(store, agents=[service_agent()])
        app.runtime._observers.extend(observers)
        engine: Any = app.engine  # the built-in engine's look at the claims
        busy = engine._busy

        async def quiet_busy(run_id: str) -> bool:
            # App.wait's own looks at the claims are the test's, not the run's.
            active, counter.active = counter.active, False
            try:
                return await busy(run_id)
            finally:
                counter.active = active

        engine._busy = quiet_busy
        try:
            await app.start("warm-up", "bench", "go")  # the file, the worker, first imports
            await app.wait("warm-up")
            for i in range(runs):
                counter.start()
                await app.start(f"run-{i}", "bench", "go")
                await app.wait(f"run-{i}")
                await app.publisher.wait_idle()
                counter.stop()
                snap = await load(f"run-{i}")
                if snap is None or snap.run.status != "completed":
                    raise AssertionError(f"run-{i} did not complete: {snap and snap.run.status}")
        finally:
            await app.close()
            await store.close()
    out.runs = runs
    out.counts = counter.counts
    out.counts.iterations = 1
    return out
