"""What writing one stored document costs: pydantic-core against the codec (msgspec where it may).

The documents are those a step of the peer harness's loop writes (``benchmarks/peers``): its
run record, checkpoint, message, block and call record, taken from a real run on a
``MemoryStore``; and, without their fields at their defaults, the step's history entry (its
body and its checkpoint, every store writes one a step) and the call row the SQL stores write.
For each, the microseconds of one write by pydantic-core's serializer (what the code did before
the quick writer) and by the code now (msgspec where it writes the same bytes), the median of
``--rounds`` rounds of ``--number`` writes; and whether both wrote the same bytes. Figures
only.

Usage::

    .venv/bin/python benchmarks/codec.py
    .venv/bin/python benchmarks/codec.py --number 50000 --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import timeit
from typing import Any

from steadyrun import Agent, Limits, MemoryStore, Runtime, tool
from steadyrun._codec import FORMAT, _adapter, encode
from steadyrun.records import CallRecord, Checkpoint, Step
from steadyrun.stores import _call_rows, _history, _memory
from steadyrun.testing import FunctionModel, call, text, tool_calls


def _step_of_a_loop() -> Step:
    """A step of a run that asks for a tool with 1 KB of arguments, as the harness's does."""
    steps: list[Step] = []
    encode_step = _memory.encode_step

    def keep(run_id: str, step: Step) -> Any:
        steps.append(step)
        return encode_step(run_id, step)

    def echo(text: str) -> str:
        """Return the text.

        Args:
            text: What to return.
        """
        return text

    def respond(request: Any) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < 4:
            return tool_calls(call("echo", {"text": f"{done:06d}" + "x" * 1000}, id=f"c{done}"))
        return text("done")

    agent = Agent(
        name="loop",
        model=FunctionModel(respond),
        tools=[tool(echo, inline=True)],
        limits=Limits(max_iterations=9),
    )
    _memory.encode_step = keep
    try:
        asyncio.run(Runtime(MemoryStore()).run(agent, run_id="r", input="go"))
    finally:
        _memory.encode_step = encode_step
    return next(s for s in steps if s.calls and s.blocks and s.context.append)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--number", type=int, default=20000, help="writes per round")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    step = _step_of_a_loop()
    docs = {
        "RunRecord": step.run,
        "Checkpoint": step.checkpoint,
        "Message": step.context.append[0],
        "Block": step.blocks[0],
        "CallRecord": step.calls[0],
    }
    head = b'{"format":%d,"data":' % FORMAT

    def timed(fn: Any) -> float:
        runs = [timeit.timeit(fn, number=args.number) for _ in range(args.rounds)]
        return statistics.median(runs) / args.number * 1e6

    print("| document | bytes | pydantic-core us | codec us | same bytes |")
    print("|---|---:|---:|---:|---|")
    total_old = total_new = 0.0
    for name, doc in docs.items():
        serializer = _adapter(type(doc)).serializer
        old = timed(lambda d=doc, s=serializer: head + s.to_json(d) + b"}")
        new = timed(lambda d=doc: encode(d))
        same = head + serializer.to_json(doc) + b"}" == encode(doc)
        total_old, total_new = total_old + old, total_new + new
        print(f"| {name} | {len(encode(doc)):,} | {old:.2f} | {new:.2f} | {same} |")
    print(f"| all five | | {total_old:.2f} | {total_new:.2f} | |")

    entry = _history.entry_of(step, 0, len(step.context.append))
    body, cp = _adapter(type(entry)).serializer, _adapter(Checkpoint).serializer
    quick_body, quick_cp = _quick(_history._QUICK_BODY), _quick(_history._QUICK_CHECKPOINT)
    call, row, quick_row = step.calls[0], _adapter(CallRecord).serializer, _quick(_call_rows._QUICK)

    def entry_old() -> tuple[bytes, bytes]:
        return (
            body.to_json(entry, exclude_defaults=True, exclude={"checkpoint"}),
            cp.to_json(entry.checkpoint, exclude_defaults=True),
        )

    def entry_new() -> tuple[bytes | None, bytes | None]:
        return quick_body(entry), quick_cp(entry.checkpoint)

    without = {
        "history entry": (entry_old, entry_new),
        "call row": (lambda: row.to_json(call, exclude_defaults=True), lambda: quick_row(call)),
    }
    print()
    print("| without defaults | pydantic-core us | quick us | same bytes |")
    print("|---|---:|---:|---|")
    for name, (old_fn, new_fn) in without.items():
        old, new = timed(old_fn), timed(new_fn)
        print(f"| {name} | {old:.2f} | {new:.2f} | {old_fn() == new_fn()} |")


def _quick(fn: Any) -> Any:
    if fn is None:
        raise SystemExit("codec.py: this type has no quick writer")
    return fn


if __name__ == "__main__":
    main()
