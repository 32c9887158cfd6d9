"""The ``steadyrun`` command line (typer + rich); see docs/cli.md.

``main(argv)`` returns the exit code: 0 on success, 1 when the operation cannot apply to the
run as it is (a typed steadyrun error, printed in one line), 2 for a wrong command line, 3
when a run the command waited for failed, 130 on Ctrl-C (see ``steadyrun._cli_errors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Coroutine, Sequence
from typing import Annotated, Any

import typer

from steadyrun._cli_drive import drive_commands
from steadyrun._cli_errors import USAGE, CommandFailed, explain
from steadyrun._cli_history import history_commands
from steadyrun._cli_inbox import inbox_command
from steadyrun._cli_lifecycle import lifecycle_commands
from steadyrun._cli_runs import AppOpt, JsonOpt, runs, usage, write_commands
from steadyrun._cli_target import load_target, temporal_engine
from steadyrun._errors import SteadyrunError

__all__ = ["app", "build_app", "main"]


def _version(value: bool) -> None:
    if value:
        from steadyrun import __version__

        print(f"steadyrun {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    """The ``steadyrun`` command, with its subcommands."""
    cli = typer.Typer(
        name="steadyrun",
        help="Durable, resumable runs for LLM tool-calling agents.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @cli.callback()
    def root(
        version: Annotated[
            bool, typer.Option("--version", callback=_version, is_eager=True, help="Print it.")
        ] = False,
    ) -> None:
        """Durable, resumable runs for LLM tool-calling agents."""

    @cli.command(
        help="Run an order-support agent on a SQLite file in a worker process, kill that "
        "process with SIGKILL in the middle of a refund, and resume the run from the file in a "
        "new process: the refund is not repeated. Needs no API key."
    )
    def demo(
        model: Annotated[
            str | None,
            typer.Option(
                metavar="SPEC",
                help="run the story with a real model instead of the scripted one, e.g. "
                "local:gemma3-270m or openai:gpt-4.1; a real model may not follow the story",
            ),
        ] = None,
        db: Annotated[
            str | None,
            typer.Option(metavar="PATH", help="the SQLite file to create and keep (new)"),
        ] = None,
        keep: Annotated[bool, typer.Option(help="keep the temporary directory")] = False,
        no_color: Annotated[bool, typer.Option("--no-color", help="print without colors")] = False,
        engine: Annotated[
            str,
            typer.Option(
                help="builtin (a SQLite file and worker processes) or temporal (a local "
                "Temporal dev server from the temporal extra)"
            ),
        ] = "builtin",
    ) -> None:
        from steadyrun._demo import model_problem, run_demo

        if engine == "temporal":
            try:
                from steadyrun.temporal._demo import run_demo as run_temporal_demo
            except ImportError as exc:
                print(
                    f"steadyrun demo --engine temporal: {exc} (pip install 'steadyrun[temporal]')",
                    file=sys.stderr,
                )
                raise typer.Exit(2) from exc
            import asyncio
            from pathlib import Path

            path = Path(db) if db is not None else None
            raise typer.Exit(asyncio.run(run_temporal_demo(db=path)))
        if engine != "builtin":
            print(
                f"steadyrun demo: --engine must be builtin or temporal, not {engine!r}",
                file=sys.stderr,
            )
            raise typer.Exit(2)

        if model is not None:
            problem = model_problem(model)
            if problem:
                print(f"steadyrun demo: --model {model}: {problem}", file=sys.stderr)
                raise typer.Exit(2)
        raise typer.Exit(run_demo(color=not no_color, db=db, keep=keep, model=model))

    @cli.command(
        help="Serve the HTTP API and web page of --app, executing its runs in an embedded "
        "worker (needs the service extra)."
    )
    def serve(
        app: AppOpt = None,
        host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="port")] = 8000,
        token: Annotated[
            list[str] | None,
            typer.Option(
                help="accepted bearer token, NAME:TOKEN to record NAME as who acts with it "
                "(repeat; default STEADYRUN_API_TOKENS)"
            ),
        ] = None,
        no_worker: Annotated[
            bool,
            typer.Option("--no-worker", help="serve the API only; separate workers execute runs"),
        ] = False,
        claim_ttl: Annotated[
            float | None,
            typer.Option(help="claim seconds of the embedded worker (a dead serve's runs wait)"),
        ] = None,
        engine: Annotated[
            str,
            typer.Option(
                help="what executes the runs: builtin (workers on the store's claims) or "
                "temporal (workflows on --temporal-address; the embedded worker is a Temporal "
                "one)"
            ),
        ] = "builtin",
        temporal_address: Annotated[
            str | None,
            typer.Option(help="Temporal frontend HOST:PORT (default STEADYRUN_TEMPORAL_ADDRESS)"),
        ] = None,
        task_queue: Annotated[
            str | None,
            typer.Option(help="Temporal task queue (default STEADYRUN_TASK_QUEUE or steadyrun)"),
        ] = None,
    ) -> None:
        if engine not in ("builtin", "temporal"):
            usage(f"--engine must be builtin or temporal, not {engine!r}")
        try:
            import uvicorn

            from steadyrun.service import App, create_app, tune_gc
        except ImportError as exc:
            usage(f"serve is not available: {exc} (pip install 'steadyrun[service]')")
        target = _run(load_target(app, None))
        # An App serves itself; anything else (Operations, Runtime) gets an App on its runtime.
        served = target.app if isinstance(target.app, App) else App(target.runtime)
        if engine == "temporal" and served.engine.name != "temporal":
            # The Temporal client connects in the server's event loop, on first use.
            made = temporal_engine(temporal_address, task_queue, worker=not no_worker)
            served = App(served.runtime, agents=served.agents.values(), engine=made)
        if claim_ttl is not None:
            served.claim_ttl = claim_ttl
        from steadyrun.service._gate import parse_tokens

        tokens = parse_tokens(",".join(token)) if token else None
        api = create_app(served, tokens=tokens, worker=not no_worker)
        tune_gc()  # the app is built: what exists now lives as long as the server
        uvicorn.run(api, host=host, port=port)

    @cli.command(
        help="Execute runnable runs of --app's store (SQLite or PostgreSQL) until SIGTERM."
    )
    def worker(
        app: AppOpt = None,
        concurrency: Annotated[int, typer.Option(help="runs executed at once")] = 8,
        ttl: Annotated[
            float,
            typer.Option(
                "--claim-ttl", "--ttl", help="claim seconds (a dead worker's runs wait this long)"
            ),
        ] = 30,
        grace: Annotated[float, typer.Option(help="seconds to reach a checkpoint on stop")] = 30,
        loop: Annotated[
            str,
            typer.Option(help="event loop: auto (uvloop when installed), asyncio, uvloop"),
        ] = "auto",
        json_out: JsonOpt = False,
    ) -> None:
        _run(_work(app, concurrency, ttl, grace, json_out), loop=loop)

    group = runs()
    drive_commands(group, cli)
    lifecycle_commands(group)
    history_commands(group)
    cli.add_typer(
        group,
        name="runs",
        help="Start runs, send them messages, settle their results, resume them; list, show, "
        "follow, cancel, fork, export, import and delete them; list their steps.",
    )
    write_commands(cli)
    inbox_command(cli)
    return cli


async def _work(app: str | None, concurrency: int, ttl: float, grace: float, js: bool) -> None:
    from rich.console import Console

    from steadyrun.service import Worker, tune_gc

    target = await load_target(app, None)
    store = target.store
    # Every store has its claims (``store.leases``): SQLite (one file shared by processes of
    # this machine) and PostgreSQL alike.
    w = Worker(
        target.runtime,
        concurrency=concurrency,
        ttl=ttl,
        grace=grace,
        handle_signals=True,
    )
    console = Console(stderr=True)
    if not js:
        console.print(f"worker [bold]{w.owner}[/] executing up to {concurrency} runs; Ctrl-C stops")
    tune_gc()  # the worker is built: what exists now lives as long as the process
    try:
        await w.run()
    finally:
        await store.close()
    stats = {
        "owner": w.owner,
        "executed": w.stats.executed,
        "drained": w.stats.drained,
        "loop": _loop_name(),
    }
    if js:
        import json

        print(json.dumps(stats))
    else:
        console.print(f"stopped: {stats}")


LOOPS = ("auto", "asyncio", "uvloop")
"""The event loops a long-running command takes (``--loop``)."""


def _run(coro: Coroutine[Any, Any, Any], *, loop: str = "asyncio") -> Any:
    """Run ``coro`` on asyncio's loop, or uvloop's: ``auto`` takes uvloop when installed.

    A worker spends less CPU a run on uvloop (``benchmarks/scale.py``, docs/benchmarks.md);
    ``serve`` gets it from uvicorn, which picks it the same way.
    """
    if loop not in LOOPS:
        coro.close()
        raise typer.BadParameter(f"{loop!r} is not one of {', '.join(LOOPS)}", param_hint="--loop")
    if loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if loop == "uvloop":
                coro.close()
                raise typer.BadParameter(
                    "uvloop is not installed (pip install 'steadyrun[service]')",
                    param_hint="--loop",
                ) from None
        else:
            return uvloop.run(coro)
    return asyncio.run(coro)


def _loop_name() -> str:
    """``uvloop`` or ``asyncio``: the loop this coroutine runs on."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"


app = build_app()
"""The typer application (``python -m steadyrun`` and the ``steadyrun`` script run it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``steadyrun`` command; returns the exit code."""
    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:  # the help, on stderr: a command is missing
        with contextlib.redirect_stdout(sys.stderr):
            command.main(args=["--help"], prog_name="steadyrun", standalone_mode=False)
        return 2
    try:
        code = command.main(args=args, prog_name="steadyrun", standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except CommandFailed as exc:
        print(f"steadyrun: {exc.message}", file=sys.stderr)
        return exc.code
    except SteadyrunError as exc:  # raised before a store was opened
        failed = explain(exc)
        print(f"steadyrun: {failed.message}", file=sys.stderr)
        return failed.code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else USAGE)
    except Exception as exc:
        # Usage errors of click (typer vendors its own click: matched by shape, not class).
        show = getattr(exc, "show", None)
        if show is None or not isinstance(getattr(exc, "exit_code", None), int):
            raise
        show()
        return int(exc.exit_code)  # type: ignore[attr-defined]
    return code if isinstance(code, int) else 0
