"""The service under load: 1,000 runs over HTTP, a simulated 50 ms model, the live stream.

The FastAPI app of ``steadyrun.service`` (``create_app`` over an ``App`` on a ``SqliteStore``
in a temporary directory) is served by uvicorn on ``127.0.0.1`` on a free port, in this
process. A client (``httpx.AsyncClient``) starts the runs with ``POST /runs``, keeping at most
``--concurrency`` runs in flight: a slot is freed when its run completed. Every
``--follow-every``-th run is followed from its start with ``GET /runs/{id}/stream?until=done``
(server-sent events).

Where the client runs (``--client``): by default in a second process (``process``), so the
figures measure the server: *CPU ms/run* is the serving process's alone, and the client's is
printed beside it. The server tells the client of each run's completion over a pipe (the
client needs no polling for runs it does not follow). With ``--client inline`` the client shares
the server's process and event loop (and so one core at a time), as every figure before
2026-12-06 was measured: its CPU and runs/s then include the client's own HTTP work (at 50 in
flight about a third of the process's CPU, mostly ``httpcore``'s pool looking at each idle
connection on each request).

Each run: the model (a ``FunctionModel`` that sleeps ``--model-ms``, then answers) asks for one
``work`` call, then answers with a final text; so a run spends two model latencies waiting.

Figures (figures only, never pass/fail):

* **runs/s**: runs divided by the time from the first ``POST /runs`` to the last run completed;
* **CPU ms/run**: the serving process's CPU time (every thread: server, SQLite; and the
  client's with ``--client inline``) over the same span, divided by the runs; less sensitive
  than runs/s to other jobs on the machine; **client CPU ms/run**: the client process's;
* **latency**: from sending a run's ``POST /runs`` to its completion, p50 / p95 / max, where
  completion is when the app's publisher learns the run stopped executing, completed (an
  in-process hook, so the client needs no polling for runs it does not follow);
* **stream latency**: from the model answering (recorded in the ``FunctionModel`` right before
  it returns) to the follower receiving the SSE event that shows that answer: the ``work``
  call (``call_status`` or its ``tool_call`` block) for the first answer, the final text
  (its ``block_added`` or ``run_status``) for the second. p50 / p95 / max over both answers of
  every followed run.

The app's embedded worker executes up to ``--worker-concurrency`` runs at once (by default as
many as are in flight: with the app's default of 8, 50 runs in flight would mostly wait in the
store for a slot). The serving process's garbage collector is set as ``steadyrun serve`` sets
it (``steadyrun.service.tune_gc`` once the app is built; a library without it is served with
CPython's defaults, as its ``serve`` did); ``--gc default`` leaves CPython's. The script
exits non-zero when a run does not complete with its final text; it never asserts on timing.
Bounded: ``--runs`` runs, and it gives up after ``--timeout`` seconds. Loopback only.

Usage::

    .venv/bin/python benchmarks/service.py                 # 1,000 runs, 50 in flight
    .venv/bin/python benchmarks/service.py --quick         # 100 runs: a smoke run
    .venv/bin/python benchmarks/service.py --client inline # client in the server's process
    .venv/bin/python benchmarks/service.py --concurrency 200 --follow-every 5 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import uvicorn

import steadyrun
import steadyrun as sr
from steadyrun.service import App, create_app
from steadyrun.stream import Publisher
from steadyrun.testing import FunctionModel, text, tool_calls

TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGENT = "bench"
WARM_UP = 5  # untimed runs first (imports, first connections, SQLite file)


def final_text(run_id: str) -> str:
    """What a run answers at its end."""
    return f"work for {run_id} is done"


@dataclass
class Timings:
    """Clock readings (``time.perf_counter``) of the server side and the client side."""

    answered: dict[tuple[str, int], float] = field(default_factory=dict)  # (run, answer 1|2)
    completed: dict[str, float] = field(default_factory=dict)
    ended: dict[str, asyncio.Event] = field(default_factory=dict)
    posted: dict[str, float] = field(default_factory=dict)
    shown: dict[tuple[str, int], float] = field(default_factory=dict)  # SSE event received
    snapshots: dict[str, list[float]] = field(default_factory=dict)  # snapshot events received
    early_404: int = 0  # streams asked for before the run existed anywhere (asked again)
    statuses: dict[str, str] = field(default_factory=dict)
    notify: Callable[[str], None] | None = None  # tells a client process a run ended

    def ended_event(self, run_id: str) -> asyncio.Event:
        """The event set when the run stopped executing in the app."""
        return self.ended.setdefault(run_id, asyncio.Event())

    def client_side(self) -> dict[str, Any]:
        """What the client noted (sent back by a client process)."""
        return {
            "posted": self.posted,
            "shown": self.shown,
            "snapshots": self.snapshots,
            "early_404": self.early_404,
        }

    def missed(self) -> set[tuple[str, int]]:
        """Answers already in a snapshot the follower got before any delta showed them.

        Such an answer's stream latency is not measurable (the snapshot carried it).
        """
        out = set()
        for (run_id, answer), at in self.answered.items():
            shown = self.shown.get((run_id, answer))
            for t in self.snapshots.get(run_id, ()):
                if at <= t and (shown is None or t < shown):
                    out.add((run_id, answer))
        return out


class TimingPublisher(Publisher):
    """The app's publisher, noting when each run stopped executing (and how it ended)."""

    def __init__(self, store: sr.Store, timings: Timings) -> None:
        super().__init__(store)
        self.timings = timings

    async def on_run_end(self, run_id: str, status: str, error: str | None = None) -> None:
        """Do what the publisher does when an execution ends, then note the time and status."""
        await super().on_run_end(run_id, status, error)
        self.timings.statuses[run_id] = status
        if status in ("completed", "failed", "suspended", "cancelled"):
            self.timings.completed.setdefault(run_id, time.perf_counter())
            self.timings.ended_event(run_id).set()
            if self.timings.notify is not None:
                self.timings.notify(run_id)


def make_agent(timings: Timings, model_seconds: float) -> sr.Agent:
    """One ``work`` call, then the final text; the model sleeps before each answer."""

    @sr.tool
    def work(job: str) -> str:
        """Do a small job.

        Args:
            job: The job.
        """
        return f"did {job}"

    async def respond(request: sr.ModelRequest) -> sr.ModelResponse:
        await asyncio.sleep(model_seconds)
        run_id = request.messages[0].text.split()[-1]
        answer = 2 if any(m.role == "tool" for m in request.messages) else 1
        timings.answered[(run_id, answer)] = time.perf_counter()
        if answer == 1:
            return tool_calls(("work", {"job": run_id}))
        return text(final_text(run_id))

    return sr.Agent(name=AGENT, model=FunctionModel(respond), tools=[work])


def http_name(choice: str) -> str:
    """The HTTP parser uvicorn uses for ``choice`` (``auto``: httptools when installed)."""
    if choice != "auto":
        return choice
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shows(run_id: str, kind: str, data: dict[str, Any]) -> int:
    """Which model answer (1, 2) an SSE delta shows first, or 0."""
    if kind == "call_status" and data["call"]["name"] == "work":
        return 1
    if kind in ("block_added", "block_updated"):
        block = data["block"]
        if block["kind"] == "tool_call":
            return 1
        if block["kind"] == "content" and final_text(run_id) in block.get("text", ""):
            return 2
    if kind == "text_fragment" and data.get("text"):
        return 2
    if kind == "run_status" and data.get("text") == final_text(run_id):
        return 2
    return 0


async def follow(client: httpx.AsyncClient, run_id: str, timings: Timings) -> None:
    """Read the run's stream until it ends, noting when each answer first shows.

    Right after ``POST /runs`` answered, the stream may answer 404: the run is neither stored
    nor executing yet (its background task has not begun). The follower asks again (counted).
    """
    for _ in range(1000):
        if await read_stream(client, run_id, timings):
            return
        timings.early_404 += 1
        await asyncio.sleep(0.005)
    raise RuntimeError(f"the stream of {run_id} kept answering 404")


async def read_stream(client: httpx.AsyncClient, run_id: str, timings: Timings) -> bool:
    """Read the stream to its end; ``False`` when it answered 404."""
    kind = ""
    async with client.stream("GET", f"/runs/{run_id}/stream", params={"until": "done"}) as r:
        if r.status_code == 404:
            return False
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                now = time.perf_counter()
                data = json.loads(line[6:])["data"]
                if kind == "snapshot":
                    timings.snapshots.setdefault(run_id, []).append(now)
                    continue
                answer = shows(run_id, data["kind"], data)
                if answer and (run_id, answer) not in timings.shown:
                    timings.shown[(run_id, answer)] = now
    return True


async def one_run(client: httpx.AsyncClient, run_id: str, timings: Timings, watch: bool) -> None:
    """Start a run, follow it when asked, and wait until it completed."""
    ended = timings.ended_event(run_id)
    timings.posted[run_id] = time.perf_counter()
    body = {"run_id": run_id, "agent": AGENT, "input": f"job {run_id}"}
    r = await client.post("/runs", json=body)
    if r.status_code != 202:
        raise RuntimeError(f"POST /runs for {run_id} answered {r.status_code}: {r.text}")
    if watch:
        await follow(client, run_id, timings)
    await ended.wait()


async def load(
    client: httpx.AsyncClient,
    runs: Sequence[str],
    timings: Timings,
    concurrency: int,
    follow_every: int,
) -> None:
    """Run every run, at most ``concurrency`` in flight."""
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for i, run_id in enumerate(runs):
        queue.put_nowait((i, run_id))

    async def slot() -> None:
        while not queue.empty():
            i, run_id = queue.get_nowait()
            await one_run(client, run_id, timings, follow_every > 0 and i % follow_every == 0)

    await asyncio.gather(*(slot() for _ in range(concurrency)))


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``, in milliseconds."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank] * 1000


def client_limits(concurrency: int) -> httpx.Limits:
    """The client's connection pool: a connection per slot, and some for the followers."""
    return httpx.Limits(max_connections=concurrency + 10, max_keepalive_connections=None)


async def drive(
    port: int,
    runs: Sequence[str],
    timings: Timings,
    opts: dict[str, int],
    begin: Callable[[], Awaitable[None]],
) -> float:
    """The client: the warm-up, ``begin()``, then the measured runs; returns when they began."""
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers=AUTH,
        limits=client_limits(opts["concurrency"]),
        timeout=60.0,
    ) as client:
        warm = [f"warm-{i}" for i in range(WARM_UP)]
        await load(client, warm, timings, WARM_UP, 1)
        await begin()
        t0 = time.perf_counter()
        await load(client, runs, timings, opts["concurrency"], opts["follow_every"])
    return t0


def client_process(conn: Connection, port: int, runs: list[str], opts: dict[str, int]) -> None:
    """The client in a process of its own (``--client process``); see the module."""
    try:
        result = asyncio.run(client_main(conn, port, runs, opts))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        raise
    conn.send(("result", result))


async def client_main(
    conn: Connection, port: int, runs: list[str], opts: dict[str, int]
) -> dict[str, Any]:
    """Drive the runs; the server sends ``("end", run_id)`` as each ends, ``("go",)`` once."""
    timings = Timings()
    go = asyncio.Event()

    def readable() -> None:
        while conn.poll():
            message = conn.recv()
            if message[0] == "end":
                timings.ended_event(message[1]).set()
            elif message[0] == "go":
                go.set()

    asyncio.get_running_loop().add_reader(conn.fileno(), readable)
    cpu0 = 0.0

    async def begin() -> None:
        nonlocal cpu0
        conn.send(("start",))
        await go.wait()
        cpu0 = time.process_time()

    t0 = await drive(port, runs, timings, opts, begin)
    return {**timings.client_side(), "t0": t0, "cpu": time.process_time() - cpu0}


async def in_process_client(
    port: int, runs: list[str], timings: Timings, opts: dict[str, int]
) -> tuple[float, float, float | None]:
    """The client on this process's loop: (t0, this process's CPU over the span, ``None``)."""
    cpu0 = 0.0

    async def begin() -> None:
        nonlocal cpu0
        cpu0 = time.process_time()

    t0 = await drive(port, runs, timings, opts, begin)
    return t0, time.process_time() - cpu0, None


async def separate_client(
    port: int, runs: list[str], timings: Timings, opts: dict[str, int]
) -> tuple[float, float, float | None]:
    """The client in a process of its own: (t0, this process's CPU, the client's CPU)."""
    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=client_process, args=(theirs, port, runs, opts), daemon=True)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, Any]] = loop.create_future()
    cpu0 = 0.0

    def readable() -> None:
        nonlocal cpu0
        try:
            while mine.poll():
                message = mine.recv()
                if message[0] == "start":
                    cpu0 = time.process_time()
                    mine.send(("go",))
                elif message[0] == "result" and not done.done():
                    done.set_result(message[1])
                elif message[0] == "error" and not done.done():
                    done.set_exception(RuntimeError(f"the client failed: {message[1]}"))
        except EOFError:
            if not done.done():
                done.set_exception(RuntimeError("the client process went away"))
            loop.remove_reader(mine.fileno())

    timings.notify = lambda run_id: mine.send(("end", run_id))
    proc.start()
    loop.add_reader(mine.fileno(), readable)
    # uvloop's add_reader makes the descriptor non-blocking; a message longer than the pipe
    # holds (the client's result) would then come apart in recv. Blocking again, recv waits
    # for the rest of a message that began (the loop only polls the descriptor).
    os.set_blocking(mine.fileno(), True)
    try:
        result = await done
        cpu = time.process_time() - cpu0
    finally:
        loop.remove_reader(mine.fileno())
        timings.notify = None
        if proc.is_alive():
            proc.join(5)
        if proc.is_alive():
            proc.kill()
        proc.join()
    timings.posted.update(result["posted"])
    timings.shown.update(result["shown"])
    timings.snapshots.update(result["snapshots"])
    timings.early_404 += result["early_404"]
    return result["t0"], cpu, result["cpu"]


async def bench(args: argparse.Namespace, root: Path, timings: Timings) -> dict[str, Any]:
    """Serve the app, run the warm-up and the measured runs, check them, return the figures."""
    store = sr.SqliteStore(root / "runs.db")
    agent = make_agent(timings, args.model_ms / 1000)
    app = App(
        store,
        agents=[agent],
        publisher=TimingPublisher(store, timings),
        concurrency=args.worker_concurrency or args.concurrency,
    )
    api = create_app(app, tokens=[TOKEN])
    # The collector as `steadyrun serve` sets it before it serves (a library without
    # ``tune_gc`` served with CPython's defaults, and is measured so).
    tune = getattr(steadyrun.service, "tune_gc", None)
    gc_tuned = args.gc == "serve" and tune is not None
    if gc_tuned:
        tune()
    port = free_port()
    config = uvicorn.Config(
        api,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        http=args.http,
        access_log=False,
        # A slot's connection idles while its run executes (seconds at 200 in flight): by
        # default uvicorn closes it after 5 s, racing the client's next request on it.
        timeout_keep_alive=int(args.timeout) + 1,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving  # raises what stopped it
        await asyncio.sleep(0.01)
    runs = [f"r{i:05d}" for i in range(args.runs)]
    opts = {"concurrency": args.concurrency, "follow_every": args.follow_every}
    client = separate_client if args.client == "process" else in_process_client
    try:
        t0, cpu, client_cpu = await client(port, runs, timings, opts)
        wall = max(timings.completed[r] for r in runs) - t0
    finally:
        server.should_exit = True
        await serving
        await app.close()

    problems = []
    for run_id in runs:
        snap = await store.load(run_id)
        answers = [m.text for m in snap.context if m.role == "assistant" and m.text] if snap else []
        if snap is None or snap.run.status != "completed" or answers != [final_text(run_id)]:
            problems.append((run_id, snap.run.status if snap else None, answers))
    await store.close()
    if problems:
        raise SystemExit(f"{len(problems)} runs did not complete as expected, e.g. {problems[:3]}")

    latency = [timings.completed[r] - timings.posted[r] for r in runs]
    followed = [r for i, r in enumerate(runs) if args.follow_every and i % args.follow_every == 0]
    missed = [key for key in timings.missed() if key[0] in set(followed)]
    for key in missed:
        timings.shown[key] = -1.0
    stream = [
        timings.shown[(r, a)] - timings.answered[(r, a)]
        for r in followed
        for a in (1, 2)
        if timings.shown.get((r, a), -1.0) >= 0
    ]
    unseen = sum(1 for r in followed for a in (1, 2) if (r, a) not in timings.shown)
    return {
        "runs": args.runs,
        "concurrency": args.concurrency,
        "followed": len(followed),
        "model_ms": args.model_ms,
        "wall_s": wall,
        "runs_per_s": args.runs / wall,
        "worker_concurrency": app.concurrency,
        "client": args.client,
        "gc": "serve" if gc_tuned else "default",
        "cpu_ms_per_run": cpu * 1000 / args.runs,
        "client_cpu_ms_per_run": None if client_cpu is None else client_cpu * 1000 / args.runs,
        "latency_p50_ms": pct(latency, 50),
        "latency_p95_ms": pct(latency, 95),
        "latency_max_ms": max(latency) * 1000,
        "stream_n": len(stream),
        "stream_p50_ms": pct(stream, 50) if stream else None,
        "stream_p95_ms": pct(stream, 95) if stream else None,
        "stream_max_ms": max(stream) * 1000 if stream else None,
        "stream_missed": len(missed),
        "stream_unseen": unseen,
        "stream_early_404": timings.early_404,
    }


def table(rec: dict[str, Any]) -> str:
    """The figures as a markdown table."""

    def ms(key: str) -> str:
        value = rec[key]
        return "-" if value is None else f"{value:,.1f}"

    head = (
        "| runs | in flight | worker | followed | model | wall s | runs/s | CPU ms/run "
        "| client CPU ms/run | latency p50 / p95 / max ms | stream latency p50 / p95 / max ms (n) |"
    )
    client = "(in it)" if rec["client_cpu_ms_per_run"] is None else ms("client_cpu_ms_per_run")
    return "\n".join(
        [
            head,
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {rec['runs']:,} | {rec['concurrency']} | {rec['worker_concurrency']} "
            f"| {rec['followed']} | {rec['model_ms']} ms "
            f"| {rec['wall_s']:.1f} | {rec['runs_per_s']:.1f} | {rec['cpu_ms_per_run']:.1f} "
            f"| {client} "
            f"| {ms('latency_p50_ms')} / {ms('latency_p95_ms')} / {ms('latency_max_ms')} "
            f"| {ms('stream_p50_ms')} / {ms('stream_p95_ms')} / {ms('stream_max_ms')} "
            f"({rec['stream_n']}) |",
        ]
    )


def main() -> None:
    """Parse the options, run the benchmark within its time bound, print the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="100 runs: a smoke run")
    p.add_argument("--runs", type=int, default=None, help="runs to start (default 1,000)")
    p.add_argument("--concurrency", type=int, default=50, help="runs in flight at most")
    p.add_argument(
        "--worker-concurrency",
        type=int,
        default=0,
        help="runs the app's embedded worker executes at once (default: --concurrency)",
    )
    p.add_argument("--follow-every", type=int, default=10, help="follow every n-th run (0: none)")
    p.add_argument("--model-ms", type=int, default=50, help="the simulated model's latency")
    p.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
    p.add_argument("--json", action="store_true", help="print one JSON line, no table")
    p.add_argument(
        "--client",
        choices=("process", "inline"),
        default="process",
        help="the HTTP client in a second process (the figures are the server's) or in this one",
    )
    p.add_argument("--tmp", default=None, help="directory for the SQLite file (a temp dir in it)")
    p.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="the server's event loop; auto: as `steadyrun serve` (uvicorn.run) picks it, "
        "uvloop when installed",
    )
    p.add_argument(
        "--gc",
        choices=("serve", "default"),
        default="serve",
        help="the server's garbage collector: serve, as `steadyrun serve` sets it "
        "(steadyrun.service.tune_gc, when the library has it); default, CPython's",
    )
    p.add_argument(
        "--http",
        choices=("auto", "h11", "httptools"),
        default="auto",
        help="uvicorn's HTTP parser; auto: as `steadyrun serve` picks it, httptools when installed",
    )
    args = p.parse_args()
    if args.runs is None:
        args.runs = 100 if args.quick else 1000
    if args.runs < 1 or args.concurrency < 1 or args.follow_every < 0 or args.model_ms < 0:
        p.error("need --runs >= 1, --concurrency >= 1, --follow-every >= 0, --model-ms >= 0")
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="steadyrun-bench-", dir=args.tmp) as tmp:
        timings = Timings()
        try:
            # The loop uvicorn.run would make for `steadyrun serve` (its --loop choice).
            factory = uvicorn.Config(None, loop=args.loop).get_loop_factory()
            with asyncio.Runner(loop_factory=factory) as runner:
                rec = runner.run(asyncio.wait_for(bench(args, Path(tmp), timings), args.timeout))
                kind = type(runner.get_loop()).__module__
            rec["loop"] = "uvloop" if kind.startswith("uvloop") else "asyncio"
            rec["http"] = http_name(args.http)
        except TimeoutError:
            statuses: dict[str, int] = {}
            for run_id in timings.posted:
                status = timings.statuses.get(run_id, "not ended")
                statuses[status] = statuses.get(status, 0) + 1
            sys.exit(
                f"gave up after {args.timeout:.0f} s (--timeout): {len(timings.posted)} runs "
                f"started, {len(timings.completed)} ended; by status {statuses}"
            )
    rec["load_1m_before"] = load0
    rec["load_1m_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in rec.items()}))
        return
    print(
        f"steadyrun {steadyrun.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, uvicorn {uvicorn.__version__}, httpx {httpx.__version__}, "
        f"SqliteStore (synchronous FULL), loop {rec['loop']}, HTTP parser {rec['http']}, "
        f"garbage collector {'as steadyrun serve sets it' if rec['gc'] == 'serve' else 'default'}; "
        + (
            "client in a second process\n"
            if args.client == "process"
            else "client and server in one process\n"
        )
    )
    print(table(rec))
    print(
        f"\nall {rec['runs']:,} runs completed with their final text; stream answers already in "
        f"the first snapshot: {rec['stream_missed']}, never shown: {rec['stream_unseen']}; "
        f"streams that answered 404 right after the start (asked again): "
        f"{rec['stream_early_404']}; "
        f"1-min load average {load0:.1f} before, {rec['load_1m_after']:.1f} after"
    )


if __name__ == "__main__":
    main()
