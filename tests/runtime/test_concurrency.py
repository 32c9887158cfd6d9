"""Batch scheduling, shown by the order of recorded events, never by sleeping on luck."""

from __future__ import annotations

import asyncio

import steadyrun as sr
from steadyrun.testing import ScriptedModel, text, tool_calls


class Timeline:
    """Records (event, name) in order, with a logical clock."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.active: dict[str, int] = {}
        self.max_active = 0
        self.total_active = 0

    def start(self, name: str, key: str) -> None:
        self.events.append(("start", name))
        self.active[key] = self.active.get(key, 0) + 1
        self.total_active += 1
        self.max_active = max(self.max_active, self.total_active)
        assert self.active[key] == 1, f"two calls with key {key!r} overlapped"

    def end(self, name: str, key: str) -> None:
        self.events.append(("end", name))
        self.active[key] -= 1
        self.total_active -= 1

    def overlapped(self, a: str, b: str) -> bool:
        """Whether a and b were both running at some moment."""
        idx = {e: i for i, e in enumerate(self.events)}
        return idx[("start", a)] < idx[("end", b)] and idx[("start", b)] < idx[("end", a)]


async def test_same_key_never_overlaps_while_different_keys_do() -> None:
    tl = Timeline()
    b_started = asyncio.Event()

    @sr.tool(concurrency_key=lambda a: a["account"])
    async def transfer(name: str, account: str) -> str:
        """Move money."""
        tl.start(name, account)
        if name == "a1":
            # Cannot finish unless b1 (another key) runs at the same time.
            await asyncio.wait_for(b_started.wait(), timeout=10)
        if name == "b1":
            b_started.set()
        for _ in range(5):  # yield often so a same-key call would get the chance to start
            await asyncio.sleep(0)
        tl.end(name, account)
        return name

    calls = [("a1", "A"), ("a2", "A"), ("b1", "B"), ("a3", "A"), ("b2", "B")]
    model = ScriptedModel(
        [tool_calls(*[("transfer", {"name": n, "account": k}) for n, k in calls]), text("ok")]
    )
    agent = sr.Agent(
        name="bank", model=model, tools=[transfer], limits=sr.Limits(max_concurrent_tool_calls=4)
    )
    result = await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert result.status == "completed"
    assert tl.overlapped("a1", "b1")
    for x, y in [("a1", "a2"), ("a2", "a3"), ("a1", "a3"), ("b1", "b2")]:
        assert not tl.overlapped(x, y)
    # Same-key calls start in call order.
    starts = [n for e, n in tl.events if e == "start"]
    assert [n for n in starts if n.startswith("a")] == ["a1", "a2", "a3"]


async def test_calls_without_a_concurrency_declaration_run_alone() -> None:
    tl = Timeline()

    @sr.tool(concurrency_key="")
    async def read(name: str) -> str:
        """Read."""
        tl.start(name, name)
        for _ in range(5):
            await asyncio.sleep(0)
        tl.end(name, name)
        return name

    @sr.tool
    async def write(name: str) -> str:
        """Write (no concurrency declaration)."""
        tl.start(name, name)
        for _ in range(5):
            await asyncio.sleep(0)
        tl.end(name, name)
        return name

    batch = [("read", "r1"), ("read", "r2"), ("write", "w1"), ("read", "r3"), ("read", "r4")]
    model = ScriptedModel([tool_calls(*[(t, {"name": n}) for t, n in batch]), text("ok")])
    agent = sr.Agent(name="a", model=model, tools=[read, write])
    await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert tl.overlapped("r1", "r2")
    assert tl.overlapped("r3", "r4")
    for other in ["r1", "r2", "r3", "r4"]:
        assert not tl.overlapped("w1", other)
    order = [n for e, n in tl.events]
    assert order.index("w1") > max(order.index("r1"), order.index("r2"))  # nothing jumps it
    assert order.index("r3") > len(order) - 1 - order[::-1].index("w1")


async def test_max_concurrent_tool_calls_bounds_a_batch() -> None:
    tl = Timeline()

    @sr.tool(concurrency_key="")
    async def work(name: str) -> str:
        """Work."""
        tl.start(name, name)
        for _ in range(5):
            await asyncio.sleep(0)
        tl.end(name, name)
        return name

    model = ScriptedModel(
        [tool_calls(*[("work", {"name": f"w{i}"}) for i in range(7)]), text("ok")]
    )
    agent = sr.Agent(
        name="a", model=model, tools=[work], limits=sr.Limits(max_concurrent_tool_calls=3)
    )
    await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert tl.max_active == 3


async def test_results_come_back_in_call_order_when_they_finish_out_of_order() -> None:
    second_done = asyncio.Event()
    finished: list[str] = []

    @sr.tool(concurrency_key="")
    async def fetch(name: str) -> str:
        """Fetch."""
        if name == "first":
            await asyncio.wait_for(second_done.wait(), timeout=10)
        finished.append(name)
        if name == "second":
            second_done.set()
        return f"result of {name}"

    model = ScriptedModel(
        [tool_calls(("fetch", {"name": "first"}), ("fetch", {"name": "second"})), text("ok")]
    )
    agent = sr.Agent(name="a", model=model, tools=[fetch])
    await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="x")
    assert finished == ["second", "first"]
    results = model.requests[1].messages[-1].parts
    assert [p.content for p in results] == ["result of first", "result of second"]  # type: ignore[union-attr]


async def test_sync_tools_run_off_the_event_loop() -> None:
    import threading

    loop_thread = threading.get_ident()
    seen: list[int] = []

    @sr.tool
    def blocking(x: int) -> int:
        """Blocks."""
        seen.append(threading.get_ident())
        return x

    model = ScriptedModel([tool_calls(("blocking", {"x": 1})), text("ok")])
    await sr.Runtime(sr.MemoryStore()).run(
        sr.Agent(name="a", model=model, tools=[blocking]), run_id="r", input="x"
    )
    assert seen and seen[0] != loop_thread
