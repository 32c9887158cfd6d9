"""The rules of a background call that every engine applies the same way.

The built-in ``TaskManager`` and the Temporal workflow's tasks keep their tasks in different
places, but a call's arguments, its new task, a lost task's verdict, the run's ending
message, a question's listing and an answer's check must not drift apart between them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jsonschema
import pydantic

from steadyrun._errors import InvalidResponseError
from steadyrun.background._model import Task, TaskInput, ending_of
from steadyrun.background._tool import BackgroundTool
from steadyrun.runtime._host import PendingItem
from steadyrun.stores import FeedMessage


def split_arguments(
    bt: BackgroundTool, arguments: dict[str, Any]
) -> tuple[bool, pydantic.BaseModel]:
    """Whether the call asked to go to the background, and its validated arguments.

    Takes the background flag out of ``arguments``; ``ValueError`` for arguments unfit.
    """
    background = False
    if bt.background_argument:
        background = bool(arguments.pop(bt.background_argument, False))
    try:
        return background, bt.Args.model_validate(arguments)
    except pydantic.ValidationError as exc:
        raise ValueError(f"invalid arguments: {exc}") from None


def new_task(
    bt: BackgroundTool,
    args: pydantic.BaseModel,
    *,
    run_id: str,
    call_id: str,
    task_id: str,
    now: datetime,
    started: bool = False,
) -> Task:
    """The task a call of ``bt`` makes, created and updated ``now``."""
    return Task(
        id=task_id,
        run_id=run_id,
        call_id=call_id,
        tool=bt.name,
        arguments=args.model_dump_json(),
        description=bt.describe(args),
        created_at=now,
        updated_at=now,
        started=started,
    )


def lost_verdict(bt: BackgroundTool) -> tuple[bool, str]:
    """Whether a task lost with its worker needs review, and its error: the tool's traits say."""
    review = bt.side_effects and not bt.replayable
    if review:
        return review, (
            "the worker running it stopped; it may or may not have taken effect: check before "
            "starting it again"
        )
    return review, "the worker running it stopped before it finished; it is safe to start again"


def ending_message(task: Task) -> FeedMessage:
    """The message telling the run its task ended (its id makes a repeat a no-op)."""
    return FeedMessage(
        id=f"task:{task.id}:ended",
        role="system",
        content=ending_of(task),
        meta={"steadyrun.task": task.id},
    )


def question_item(task: Task, question: TaskInput) -> PendingItem:
    """A task's unanswered question as ``Runtime.pending`` lists it."""
    return PendingItem(
        kind="task_input",
        blocking=False,
        call_id=task.call_id,
        name=task.tool,
        arguments=task.arguments,
        prompt=question.prompt,
        wait_id=question.wait_id,
        response_schema=question.response_schema,
    )


def check_answer(question: TaskInput, answer: Any) -> None:
    """Raise ``InvalidResponseError`` when ``answer`` does not fit the question's schema."""
    if question.response_schema is None:
        return
    try:
        jsonschema.validate(answer, question.response_schema)
    except jsonschema.ValidationError as exc:
        raise InvalidResponseError(f"the answer does not fit the schema: {exc.message}") from None
