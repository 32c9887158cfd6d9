"""Live streaming: what followers cost a run, and how soon they see the model's words.

A writer agent's fake model streams ``--fragments`` words (``w0 w1 ...``) ``--delay`` seconds
apart (200 and 5 ms by default), recording each word's wall-clock production time. Its first
model call asks for a ``gate`` tool that returns once the followers are in, so every follower
listens before the streaming call starts and no fixed pause is timed. A run's **duration** is
its streaming phase: from the streaming call's start (``on_model_request``) to the end of the
execution (``on_run_end``), the saving of the answer included; 200 x 5 ms is its floor.

1. **Fan-out.** The same run with no follower, one, one that never reads, and ``--followers``
   (100) of which one never reads:

   * *in process*: ``Publisher.follow`` in the run's event loop (``MemoryStore``);
   * *HTTP SSE*: ``GET /runs/{id}/stream?until=done`` of the service, served by uvicorn in
     this process, whose embedded worker executes the run (``MemoryStore``); the clients in a
     separate process (httpx; the one that never reads is a socket that sends its request and
     never reads);
   * *HTTP SSE, worker process*: the same clients, but the service has no worker
     (``App(worker=False)``) and the run is executed by a child process on the same SQLite
     file, publishing on the store's live feed (the deployment ``steadyrun serve`` beside
     ``steadyrun worker``). With no follower the owner does not stream at all, so the ratio
     is to one follower.

   Printed: the median duration (each rep in parentheses) and its ratio to the median without
   followers; CPU of the process executing the run per fragment (in process: a figure that
   does not depend on the machine's load as wall time does); per reading follower the text
   fragment events (fewer than the words: joined fragments) and all events; snapshots (a
   follower past the buffer gets a fresh one); and, in process, the memory held per follower
   (``tracemalloc`` mid-stream, not counting this script's own records, in a separate run).
2. **Latency.** From the model producing a word to a follower receiving it: the first word,
   and p50/p95/max over all words (a joined fragment counts for each word in it), for one
   follower alone and for the first reading follower of the many.
3. **Another process.** The run executed by a child process on a SQLite file and on
   PostgreSQL (a scratch database, dropped afterwards), followed by one ``Publisher`` here
   over the store's live feed: latency as in 2, one row per rep.

Figures only: nothing about time is asserted; it exits non-zero when a follower does not end
with the whole text. Wall time depends on the load of the machine: compare rows of one
invocation, and rerun.

Usage::

    .venv/bin/python benchmarks/stream_fanout.py                # 3 reps, about 5 minutes
    .venv/bin/python benchmarks/stream_fanout.py --reps 5 --parts inproc http
    .venv/bin/python benchmarks/stream_fanout.py --json         # one JSON line per row
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse, ResponseDelta, Usage, deltas_of
from steadyrun.stores import MemoryStore, Store
from steadyrun.stream import BlockAdded, Publisher, RunStatusChanged, TextFragment
from steadyrun.testing import text, tool_calls

TOKEN = "bench-token"
ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
PATIENCE = 120.0  # seconds before a step of the benchmark is given up
# An owner looks for listeners on the live feed at most every 0.5 s (SQLite) or 1 s
# (PostgreSQL), and streams a model call only when the last look found one: a follower that
# started listening less than that before the call would see the answer only once saved.
FEED_SETTLE = 1.5

Row = dict[str, Any]


# -- the writer ------------------------------------------------------------------------------


def answer(count: int) -> str:
    """The whole text the writer streams."""
    return "".join(f"w{i} " for i in range(count))


class Writer:
    """A fake streaming model: a ``gate`` call first, then ``count`` words ``delay`` apart."""

    def __init__(self, count: int, delay: float) -> None:
        self.count, self.delay = count, delay
        self.produced: list[float] = []
        self.midway: Callable[[], None] | None = None

    def _gated(self, request: ModelRequest) -> bool:
        return any(m.role == "tool" for m in request.messages)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if not self._gated(request):
            return tool_calls(("gate", {}))
        return text(answer(self.count))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ResponseDelta]:
        if not self._gated(request):
            for delta in deltas_of(await self.respond(request)):
                yield delta
            return
        self.produced = []
        for i in range(self.count):
            self.produced.append(time.time())
            yield ResponseDelta(part="text", index=0, text=f"w{i} ")
            if i == self.count // 2 and self.midway is not None:
                self.midway()
            await asyncio.sleep(self.delay)
        yield ResponseDelta(part="finish", finish_reason="stop", usage=Usage(output_tokens=1))


class Gate:
    """Opened when the followers are in: by this process, or by a file appearing."""

    def __init__(self, path: Path | None = None) -> None:
        self.opened = asyncio.Event()
        self.path = path

    async def wait(self) -> None:
        if self.path is None:
            await self.opened.wait()
            return
        for _ in range(int(PATIENCE / 0.002)):
            if self.path.exists():
                return
            await asyncio.sleep(0.002)


def writer_agent(count: int, delay: float, gate: Gate) -> sr.Agent:
    """The writer agent (see ``Writer``); its ``gate`` tool waits for ``gate``."""

    @sr.tool(name="gate", side_effects=False)
    async def gate_tool() -> str:
        """Wait until the followers are in."""
        await gate.wait()
        return "ok"

    return sr.Agent(name="writer", model=Writer(count, delay), tools=[gate_tool])


class Clock(sr.Observer):
    """When each run's latest model call started and when its execution ended."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[float, float]] = {}
        self.ended: dict[str, asyncio.Event] = {}
        self.end: dict[str, tuple[float, float]] = {}

    def on_model_request(self, run_id: str, model_call_id: str, request: ModelRequest) -> None:
        self.calls[run_id] = (time.time(), time.process_time())

    def on_run_end(self, run_id: str, status: str, error: str | None = None) -> None:
        self.end[run_id] = (time.time(), time.process_time())
        self.ended.setdefault(run_id, asyncio.Event()).set()

    async def duration(self, run_id: str) -> tuple[float, float]:
        """Wall and CPU seconds (of this process) from the streaming call's start to the end."""
        async with asyncio.timeout(PATIENCE):
            await self.ended.setdefault(run_id, asyncio.Event()).wait()
        (start, cpu_start), (end, cpu_end) = self.calls[run_id], self.end[run_id]
        return end - start, cpu_end - cpu_start


def check(ok: bool, what: str) -> None:
    """Exit non-zero (a wrong result, never a time) unless ``ok``."""
    if not ok:
        sys.exit(f"stream_fanout: not so: {what}")


async def appeared(store: Store, run_id: str) -> None:
    """Wait until the run is in the store."""
    for _ in range(int(PATIENCE / 0.005)):
        if await store.load(run_id) is not None:
            return
        await asyncio.sleep(0.005)
    check(False, f"run {run_id} appeared")


# -- what followers saw ----------------------------------------------------------------------


@dataclass(frozen=True)
class Crowd:
    """Who follows: ``readers`` that read everything, ``stuck`` that never read."""

    readers: int
    stuck: int = 0

    @property
    def label(self) -> str:
        if self.stuck and self.readers:
            return f"{self.readers + self.stuck} ({self.stuck} never reads)"
        return f"{self.stuck} never reads" if self.stuck else str(self.readers)


@dataclass
class Seen:
    """What one follower received."""

    events: int = 0
    fragments: int = 0
    snapshots: int = 0
    text: str = ""
    arrivals: list[tuple[float, str]] = field(default_factory=list)

    def fragment(self, at: float, piece: str) -> None:
        self.fragments += 1
        self.text += piece
        self.arrivals.append((at, piece))

    def plain(self) -> Row:
        return {"events": self.events, "fragments": self.fragments, "snapshots": self.snapshots,
                "text": self.text, "arrivals": self.arrivals}  # fmt: skip


def latencies_ms(seen: Seen, produced: list[float]) -> list[float]:
    """Per word: arrival minus production (a joined fragment counts for each of its words)."""
    out: list[float] = []
    for at, piece in seen.arrivals:
        for word in piece.split():
            out.append(1000 * (at - produced[int(word[1:])]))
    return out


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def follow_in_process(
    publisher: Publisher, run_id: str, seen: Seen, ready: asyncio.Event
) -> None:
    """Read the run's events until it completed, noting fragments and their arrival."""
    async for event in publisher.follow(run_id, poll_interval=30):
        now = time.time()
        seen.events += 1
        if event.kind == "snapshot" and event.snapshot is not None:
            seen.snapshots += 1
            seen.text = "".join(b.text for b in event.snapshot.blocks if b.kind == "content")
            ready.set()
            if event.snapshot.status == "completed":
                return
        elif isinstance(event.delta, TextFragment):
            seen.fragment(now, event.delta.text)
        elif isinstance(event.delta, BlockAdded) and event.delta.block.live:
            seen.fragment(now, event.delta.block.text)  # a live block starts with a word
        elif isinstance(event.delta, RunStatusChanged) and event.delta.status == "completed":
            return


# -- 1 and 2, in process ---------------------------------------------------------------------


async def in_process(crowd: Crowd, count: int, delay: float, memory: bool = False) -> Row:
    """One run with ``crowd`` following in process."""
    store = MemoryStore()
    gate, clock = Gate(), Clock()
    agent = writer_agent(count, delay, gate)
    model = agent.model
    assert isinstance(model, Writer)
    publisher = Publisher(store)
    runtime = sr.Runtime(store, agents=[agent], observers=[publisher, clock])
    run_id = uuid.uuid4().hex
    running = asyncio.create_task(runtime.run(agent, run_id=run_id, input="write"))
    await appeared(store, run_id)
    held: list[int] = []
    if memory:
        tracemalloc.start()
        mine = [tracemalloc.Filter(False, __file__)]  # this script's records are not held

        def sample() -> None:
            traced = tracemalloc.take_snapshot().filter_traces(mine)
            held.append(sum(stat.size for stat in traced.statistics("filename")))

        sample()
        model.midway = sample
    seen = [Seen() for _ in range(crowd.readers)]
    readies = [asyncio.Event() for _ in seen]
    tasks = [
        asyncio.create_task(follow_in_process(publisher, run_id, s, r))
        for s, r in zip(seen, readies, strict=True)
    ]
    # follow() is an async generator (typed as an iterator): it is closed when done.
    stuck = [
        cast("AsyncGenerator[Any, None]", publisher.follow(run_id, poll_interval=30))
        for _ in range(crowd.stuck)
    ]
    for follower in stuck:
        await anext(follower)  # following, and never read again
    for ready in readies:
        await ready.wait()
    gate.opened.set()
    result = await running
    duration, cpu = await clock.duration(run_id)
    await publisher.wait_idle()
    async with asyncio.timeout(PATIENCE):
        await asyncio.gather(*tasks)
    for follower in stuck:
        await follower.aclose()
    if memory:
        tracemalloc.stop()
    check(result.status == "completed", f"the run ended {result.status}")
    for s in seen:
        check(s.text == answer(count), "a follower in process got the whole text")
    return {"duration": duration, "cpu": cpu, "seen": seen, "produced": model.produced,
            "held": held[-1] - held[0] if len(held) > 1 else None}  # fmt: skip


# -- 1 and 2, over HTTP (the clients in another process) -------------------------------------


async def sse_clients(base: str, run_id: str, readers: int, stuck: int) -> None:
    """The client process: SSE followers, and sockets that never read; prints what came."""
    seen = [Seen() for _ in range(readers)]
    readies = [asyncio.Event() for _ in seen]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=readers + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits) as client:

        async def read(s: Seen, ready: asyncio.Event) -> None:
            url = f"/runs/{run_id}/stream?until=done"
            async with client.stream("GET", url, timeout=PATIENCE) as response:
                kind = ""
                async for line in response.aiter_lines():
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:") and kind:
                        now = time.time()
                        data = json.loads(line[5:])["data"]
                        s.events += 1
                        if kind == "snapshot":
                            s.snapshots += 1
                            blocks = data["blocks"]
                            s.text = "".join(b["text"] for b in blocks if b["kind"] == "content")
                            ready.set()
                        elif data["kind"] == "text_fragment":
                            s.fragment(now, data["text"])
                        elif data["kind"] == "block_added" and data["block"].get("live"):
                            s.fragment(now, data["block"]["text"])

        tasks = [asyncio.create_task(read(s, r)) for s, r in zip(seen, readies, strict=True)]
        host, port = base.removeprefix("http://").split(":")
        request = (f"GET /runs/{run_id}/stream HTTP/1.1\r\nHost: {host}\r\n"
                   f"Authorization: Bearer {TOKEN}\r\n\r\n").encode()  # fmt: skip
        sockets = []
        for _ in range(stuck):
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(request)
            await writer.drain()  # and its socket is never read
            sockets.append(writer)
        for ready in readies:
            await ready.wait()
        await asyncio.sleep(0.3)  # the stuck sockets' requests are served too
        print("ready", flush=True)
        async with asyncio.timeout(PATIENCE):
            await asyncio.gather(*tasks)
            if not tasks:
                await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for writer in sockets:
            writer.close()
    print(json.dumps([s.plain() for s in seen]), flush=True)


class Clients:
    """The client process of one measurement."""

    def __init__(self, base: str, run_id: str, crowd: Crowd) -> None:
        self.args = ["--sse-clients", base, run_id, str(crowd.readers), str(crowd.stuck)]
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the clients; return once they all follow."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, *self.args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stdout is not None
        async with asyncio.timeout(PATIENCE):
            line = await self.proc.stdout.readline()
        check(line.strip() == b"ready", f"the clients follow (got {line!r})")

    async def seen(self, count: int) -> list[Seen]:
        """What the reading clients received, once the run completed."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"done\n")  # for a crowd that never reads
        async with asyncio.timeout(PATIENCE):
            raw, _ = await self.proc.communicate()
        check(self.proc.returncode == 0, "the client process succeeded")
        out = []
        for item in json.loads(raw):
            s = Seen(item["events"], item["fragments"], item["snapshots"], item["text"])
            s.arrivals = [(at, piece) for at, piece in item["arrivals"]]
            check(s.text == answer(count), "an SSE client got the whole text")
            out.append(s)
        return out


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    """``app`` (a ``steadyrun.service.App``) served by uvicorn on loopback, in this loop."""
    import uvicorn

    from steadyrun.service import create_app

    api = create_app(app, tokens=[TOKEN], stream_poll_seconds=5)
    port = free_port()
    config = uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    for _ in range(int(PATIENCE / 0.02)):
        if server.started:
            break
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


async def over_http(
    base: str, gate: Gate, model: Writer, clock: Clock, crowd: Crowd, count: int
) -> Row:
    """One run executed by the server's worker, with ``crowd`` following from another process."""
    run_id = uuid.uuid4().hex
    gate.opened.clear()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers) as client:
        body = {"run_id": run_id, "agent": "writer", "input": "write"}
        check((await client.post("/runs", json=body)).status_code == 202, "the run started")
    clients = Clients(base, run_id, crowd) if crowd.readers or crowd.stuck else None
    if clients is not None:
        await clients.start()
    gate.opened.set()
    duration, cpu = await clock.duration(run_id)
    seen = await clients.seen(count) if clients is not None else []
    return {"duration": duration, "cpu": cpu, "seen": seen, "produced": list(model.produced)}


async def worker_http(base: str, store: Store, crowd: Crowd, count: int, delay: float,
                      tmp: Path) -> Row:  # fmt: skip
    """One run executed by a child process on the server's SQLite file, followed over HTTP."""
    run_id = uuid.uuid4().hex
    gate_file = tmp / f"gate-{run_id}"
    url = str(getattr(store, "path", ""))
    owner = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--writer-child", url, run_id, str(count), str(delay),
        str(gate_file), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await appeared(store, run_id)
    clients = Clients(base, run_id, crowd)
    await clients.start()
    await asyncio.sleep(FEED_SETTLE)
    gate_file.touch()
    async with asyncio.timeout(PATIENCE):
        raw, _ = await owner.communicate()
    out = json.loads(raw)
    check(out["status"] == "completed", "the owner's run completed")
    seen = await clients.seen(count)
    return {"duration": out["duration"], "cpu": out["cpu"], "seen": seen,
            "produced": out["produced"]}  # fmt: skip


# -- 3: a run executed by another process ----------------------------------------------------


async def writer_child(url: str, run_id: str, count: int, delay: float, gate_file: str) -> None:
    """The owner process: executes the run on the store, prints its figures as JSON."""
    from steadyrun._cli_target import open_store

    store = open_store(url, create=True)
    agent = writer_agent(count, delay, Gate(Path(gate_file)))
    assert isinstance(agent.model, Writer)
    clock = Clock()
    runtime = sr.Runtime(store, agents=[agent], observers=[clock])
    result = await runtime.run(agent, run_id=run_id, input="write")
    duration, cpu = await clock.duration(run_id)
    await store.close()
    print(json.dumps({"status": result.status, "produced": agent.model.produced,
                      "duration": duration, "cpu": cpu}), flush=True)  # fmt: skip


@asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A new PostgreSQL database on the local server (its DSN), dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"steadyrun_fanout_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(ADMIN_DSN, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"host=127.0.0.1 port=5432 user=postgres dbname={name}"
    finally:
        async with await psycopg.AsyncConnection.connect(ADMIN_DSN, autocommit=True) as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            await admin.execute(drop.format(sql.Identifier(name)))


async def cross_process(url: str, count: int, delay: float, tmp: Path) -> Row:
    """One run executed by a child process on ``url``, followed here over the live feed."""
    from steadyrun._cli_target import open_store

    store: Store = open_store(url, create=True)
    await store.list_runs()  # the file or schema exists before the child opens it
    run_id = uuid.uuid4().hex
    gate_file = tmp / f"gate-{run_id}"
    owner = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--writer-child", url, run_id, str(count), str(delay),
        str(gate_file), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await appeared(store, run_id)
        seen, ready = Seen(), asyncio.Event()
        following = asyncio.create_task(follow_in_process(Publisher(store), run_id, seen, ready))
        await ready.wait()
        await asyncio.sleep(FEED_SETTLE)
        gate_file.touch()
        async with asyncio.timeout(PATIENCE):
            await following
            raw, _ = await owner.communicate()
    finally:
        await store.close()
    out = json.loads(raw)
    check(out["status"] == "completed", "the owner's run completed")
    check(seen.text == answer(count), "the follower in this process got the whole text")
    return {"seen": seen, "produced": out["produced"]}


# -- the report ------------------------------------------------------------------------------


def fanout_row(path: str, crowd: Crowd, runs: list[Row], base: float, count: int) -> Row:
    """One row of the fan-out table from the reps of one crowd."""
    durations = [1000 * r["duration"] for r in runs]
    median = statistics.median(durations)
    readers = [s for r in runs for s in r["seen"]]
    row: dict[str, Any] = {
        "path": path,
        "followers": crowd.label,
        "duration_ms": round(median),
        "durations_ms": [round(d) for d in durations],
        "ratio": round(median / base, 3),
        "cpu_ms_per_fragment": round(statistics.median(r["cpu"] for r in runs) * 1000 / count, 2),
    }
    if readers:
        frags = [s.fragments for s in readers]
        row["fragment_events"] = [min(frags), statistics.median(frags), max(frags)]
        row["events"] = statistics.median([s.events for s in readers])
        row["snapshots_max"] = max(s.snapshots for s in readers)
    return row


def latency_row(path: str, follower: str, seen: Seen, produced: list[float]) -> Row:
    """One row of the latency table."""
    ms = latencies_ms(seen, produced)
    return {"path": path, "follower": follower, "first_ms": round(ms[0], 1),
            "p50_ms": round(pct(ms, 0.5), 1), "p95_ms": round(pct(ms, 0.95), 1),
            "max_ms": round(max(ms), 1), "fragment_events": seen.fragments}  # fmt: skip


def print_tables(fanout: list[Row], latency: list[Row], args: argparse.Namespace) -> None:
    """The two markdown tables."""
    print(f"steadyrun {sr.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
          f", load average {os.getloadavg()[0]:.1f}, {args.fragments} fragments"
          f" {1000 * args.delay:g} ms apart, {args.reps} reps")  # fmt: skip
    if fanout:
        print("\n| path | followers | run ms: median (reps) | ratio | CPU ms per fragment |"
              " fragment events per reader: min/median/max | events per reader |"
              " snapshots (max) | memory per follower |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for r in fanout:
            frag = "/".join(f"{x:g}" for x in r.get("fragment_events", [])) or "-"
            mem = f"{r['memory_per_follower_b']:,} B" if "memory_per_follower_b" in r else "-"
            reps = ", ".join(str(d) for d in r["durations_ms"])
            print(f"| {r['path']} | {r['followers']} | {r['duration_ms']} ({reps}) |"
                  f" {r['ratio']:.2f} | {r['cpu_ms_per_fragment']:g} | {frag} |"
                  f" {r.get('events', '-')} | {r.get('snapshots_max', '-')} | {mem} |")  # fmt: skip
    if latency:
        print("\n| path | follower | first word ms | p50 ms | p95 ms | max ms | fragment events |")
        print("|---|---|---|---|---|---|---|")
        for r in latency:
            print(f"| {r['path']} | {r['follower']} | {r['first_ms']:g} | {r['p50_ms']:g} |"
                  f" {r['p95_ms']:g} | {r['max_ms']:g} | {r['fragment_events']} |")  # fmt: skip


async def measure(
    path: str, crowds: list[Crowd], args: argparse.Namespace, once: Callable[[Crowd], Any]
) -> tuple[list[Row], list[Row]]:
    """Rows for ``crowds`` (interleaved reps); the ratio is to the first crowd's median."""
    runs: dict[Crowd, list[Row]] = {c: [] for c in crowds}
    for _ in range(args.reps):
        for crowd in crowds:
            print(f"... {path}, {crowd.label}", file=sys.stderr, flush=True)
            runs[crowd].append(await once(crowd))
    base_ms = statistics.median(r["duration"] for r in runs[crowds[0]]) * 1000
    fanout = [fanout_row(path, c, runs[c], base_ms, args.fragments) for c in crowds]
    latency = []
    for crowd in crowds:
        if crowd.readers:
            last = runs[crowd][-1]
            who = "1 alone" if crowd.readers == 1 else f"1st of {crowd.label}"
            latency.append(latency_row(path, who, last["seen"][0], last["produced"]))
    return fanout, latency


async def main(args: argparse.Namespace) -> None:
    fanout: list[Row] = []
    latency: list[Row] = []
    count, delay, n = args.fragments, args.delay, args.followers
    crowds = [Crowd(0), Crowd(1), Crowd(0, 1), Crowd(n - 1, 1)]
    if "inproc" in args.parts:
        await in_process(Crowd(1), 20, delay)  # warm-up
        rows, lat = await measure("in process", crowds, args, lambda c: in_process(c, count, delay))
        zero = await in_process(Crowd(0), count, delay, memory=True)
        many = await in_process(crowds[-1], count, delay, memory=True)
        if zero["held"] is not None and many["held"] is not None:
            rows[-1]["memory_per_follower_b"] = (many["held"] - zero["held"]) // n
        fanout += rows
        latency += lat
    if "http" in args.parts:
        from steadyrun.service import App

        gate, clock = Gate(), Clock()
        agent = writer_agent(count, delay, gate)
        assert isinstance(agent.model, Writer)
        app = App(sr.Runtime(MemoryStore(), agents=[agent], observers=[clock]), poll=0.2)
        async with served(app) as base:
            model = agent.model
            await over_http(base, gate, model, clock, Crowd(1), count)  # warm-up
            rows, lat = await measure(
                "HTTP SSE",
                crowds,
                args,
                lambda c: over_http(base, gate, model, clock, c, count),
            )
        fanout += rows
        latency += lat
    if "worker" in args.parts:
        from steadyrun.service import App
        from steadyrun.stores import SqliteStore

        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "runs.db")
            await store.list_runs()
            async with served(App(store, worker=False)) as base:
                rows, lat = await measure(
                    "HTTP SSE, worker process", crowds[1:], args,
                    lambda c: worker_http(base, store, c, count, delay, Path(tmp)),
                )  # fmt: skip
            await store.close()
        fanout += rows
        latency += lat
    if "cross" in args.parts:
        with tempfile.TemporaryDirectory() as tmp:
            targets = [("Publisher, other process, SQLite", str(Path(tmp) / "runs.db"))]
            async with scratch_database() as dsn:
                targets.append(("Publisher, other process, PostgreSQL", dsn))
                for path, url in targets:
                    for _ in range(args.reps):
                        print(f"... {path}", file=sys.stderr, flush=True)
                        got = await cross_process(url, count, delay, Path(tmp))
                        latency.append(latency_row(path, "1 alone", got["seen"], got["produced"]))
    if args.json:
        for row in [*fanout, *latency]:
            print(json.dumps(row))
    else:
        print_tables(fanout, latency, args)


def cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--fragments", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.005, help="seconds between fragments")
    parser.add_argument("--reps", type=int, default=3)
    parts = ["inproc", "http", "worker", "cross"]
    parser.add_argument("--parts", nargs="+", default=parts, choices=parts)
    parser.add_argument("--json", action="store_true", help="one JSON line per row")
    parser.add_argument("--sse-clients", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--writer-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sse_clients:
        base, run_id, readers, stuck = args.sse_clients
        asyncio.run(sse_clients(base, run_id, int(readers), int(stuck)))
    elif args.writer_child:
        url, run_id, count, delay, gate_file = args.writer_child
        asyncio.run(writer_child(url, run_id, int(count), float(delay), gate_file))
    else:
        asyncio.run(main(args))


if __name__ == "__main__":
    cli()
