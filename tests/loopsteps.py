"""A run's steps at the store's level, as the loop saves them (no runtime): for store tests.

Input, then per tool call the response with its call's start and the settled call with its
result, then the answer: the shape of the peer workload (a 1 KiB ``echo`` argument).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from steadyrun.chat import Message, TextPart, ToolCallPart, ToolResultPart
from steadyrun.records import Block, CallRecord, Checkpoint, ContextChange, RunRecord, Step

T0 = datetime(2026, 12, 5, tzinfo=UTC)
ARGS = '{"text": "' + "x" * 1018 + '"}'  # the harness's 1 KiB echo argument


def run_record(steps: int, status: str = "running") -> RunRecord:
    at = T0 + timedelta(seconds=steps)
    return RunRecord(
        run_id="r",
        agent="a",
        status=status,  # type: ignore[arg-type]
        created_at=T0,
        updated_at=at,
        steps=steps,
    )


def start_call(k: int) -> CallRecord:
    return CallRecord(
        id=f"m{k}.c1",
        provider_call_id=f"call_{k}",
        name="echo",
        arguments=ARGS,
        rev=1,
        status="running",
        started_at=T0,
        model_call_id=f"m{k}",
    )


def settled_call(k: int) -> CallRecord:
    started = start_call(k)
    return CallRecord(
        id=started.id,
        provider_call_id=started.provider_call_id,
        name="echo",
        arguments=ARGS,
        rev=2,
        status="succeeded",
        result=f"result {k}",
        started_at=T0,
        completed_at=T0,
        model_call_id=started.model_call_id,
    )


def asked(k: int) -> Message:
    return Message(
        role="assistant", parts=[ToolCallPart(call_id=f"call_{k}", name="echo", arguments=ARGS)]
    )


def answered(k: int) -> Message:
    return Message(
        role="tool",
        parts=[ToolResultPart(call_id=f"call_{k}", name="echo", content=f"result {k}")],
    )


def loop_steps(iterations: int) -> list[Step]:
    """The steps of a run of ``iterations`` tool calls: input, then per call two steps."""
    steps = [
        Step(
            run=run_record(0),
            checkpoint=Checkpoint(turn=1),
            context=ContextChange(start=0, append=[Message.user("go")]),
            blocks=[Block(id="in", kind="input", position=0, text="go")],
        )
    ]
    for k in range(iterations):
        n = len(steps)
        steps.append(  # the response with its call's start
            Step(
                run=run_record(n),
                checkpoint=Checkpoint(turn=1, model_calls=k + 1),
                context=ContextChange(start=2 * k + 1, append=[asked(k)]),
                calls=[start_call(k)],
                blocks=[Block(id=f"b{k}", kind="content", position=k + 1, text="asked")],
            )
        )
        steps.append(  # the settled call with its result
            Step(
                run=run_record(n + 1),
                checkpoint=Checkpoint(turn=1, model_calls=k + 1),
                context=ContextChange(start=2 * k + 2, append=[answered(k)]),
                calls=[settled_call(k)],
            )
        )
    end = len(steps)
    steps.append(
        Step(
            run=run_record(end, "completed"),
            checkpoint=Checkpoint(turn=1, model_calls=iterations + 1),
            context=ContextChange(
                start=2 * iterations + 1,
                append=[Message(role="assistant", parts=[TextPart(text="done")])],
            ),
        )
    )
    return steps
