"""How a tool runs in the background: ``BackgroundTool`` and the ``Operation`` it starts.

A background tool starts one logical external operation (a build, a crawl, a long query) and
returns an ``Operation`` handle to wait on and stop. What else it can do decides what a worker
can do after a crash:

* a **plain** tool (``start`` only): the operation dies with its worker; the task is settled
  by the tool's traits (interrupted, or needs review when it has side effects);
* a **recoverable** tool also implements ``recover``: another worker re-attaches to the same
  operation from the checkpoint ``start`` left (so ``start`` must be idempotent by task id:
  a worker may die after the operation started and before its checkpoint was saved);
* a **resumable** tool also implements ``resume``: its operation can stop to wait for input
  (an ``Outcome`` of ``waiting_input``) and go on with the answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic

from steadyrun.background._model import Outcome, Update

__all__ = ["AdoptionView", "BackgroundTool", "Operation", "TaskRef"]


@dataclass(kw_only=True, frozen=True, slots=True)
class TaskRef:
    """Which task an operation serves.

    Attributes:
        task_id: Stable for the task's life: use it as the operation's idempotency key.
        attempt: 0 for the foreground call; 1, 2... for worker attempts.
        run_id: The run the task belongs to.
    """

    task_id: str
    attempt: int
    run_id: str


@dataclass(kw_only=True, frozen=True, slots=True)
class AdoptionView:
    """What the adoption policy knows when a foreground call runs past its timeout.

    Attributes:
        task_id: The task it would become.
        tool: The tool's name.
        arguments: The call's arguments (JSON text).
        elapsed: Seconds it has run.
    """

    task_id: str
    tool: str
    arguments: str
    elapsed: float


class Operation(ABC):
    """One attempt's handle on a running external operation.

    Attributes:
        checkpoint: What a worker needs to re-attach to the operation (JSON data), kept with
            the task as soon as it is adopted or started by a worker.
    """

    checkpoint: Any = None

    @abstractmethod
    async def wait(self) -> Any:
        """Wait for the operation: return its output (or an ``Outcome``); raise when it failed.

        Cancelling the wait stops watching, not the operation.
        """

    async def stop(self) -> None:  # noqa: B027 (optional, a no-op by default)
        """Cancel the operation itself; must be safe to call twice or concurrently."""

    def updates(self) -> AsyncIterator[Update] | None:
        """Progress updates in order (replayed from the start after recovery), or ``None``."""
        return None


class BackgroundTool(ABC):
    """A tool whose calls may outlive the model turn, the process and the worker.

    Subclass it, set the class attributes and implement ``start`` (and ``recover``/``resume``
    for what a worker can do after a crash); hand instances to a ``TaskManager``, and give
    the agent ``manager.tool(instance)``.

    Class attributes:
        name: The tool name the model calls.
        description: What it does, for the model.
        Args: A pydantic model of the arguments (validated before anything starts).
        foreground_timeout: Seconds a call runs in the foreground before the adoption policy
            decides; ``None``: always in the foreground.
        invocation_timeout: Seconds the whole operation may take (``None``: no limit).
        background_argument: Name of a boolean argument by which the model asks for the
            background at once (added to the schema); ``None``: the model cannot ask.
        side_effects: Whether the operation changes the world (a plain task lost with its
            worker then needs review).
        replayable: Whether a lost plain task may simply be started again by the model.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Args: ClassVar[type[pydantic.BaseModel]]
    foreground_timeout: ClassVar[float | None] = 30.0
    invocation_timeout: ClassVar[float | None] = None
    background_argument: ClassVar[str | None] = "run_in_background"
    side_effects: ClassVar[bool] = True
    replayable: ClassVar[bool] = False

    @abstractmethod
    async def start(self, task: TaskRef, args: Any) -> Operation:
        """Start the operation (idempotently by ``task.task_id`` for recoverable tools)."""

    async def recover(self, task: TaskRef, args: Any, checkpoint: Any) -> Operation:
        """Re-attach to the operation after a worker loss (recoverable tools)."""
        raise NotImplementedError

    async def resume(
        self, task: TaskRef, args: Any, checkpoint: Any, wait_id: str, answer: Any
    ) -> Operation:
        """Go on with an answer to the operation's question (resumable tools).

        Apply the same ``wait_id`` idempotently: a worker may repeat it after a crash.
        """
        raise NotImplementedError

    async def prepare_input(self, args: Any) -> Any:
        """Complete or rewrite the arguments before anything starts (must not start anything)."""
        return args

    def describe(self, args: Any) -> str:
        """A short description of a call, for the launch receipt and task listings."""
        return self.name

    def should_adopt(self, view: AdoptionView) -> bool:
        """After the foreground timeout: adopt into a task (``True``) or time out."""
        return True

    @property
    def recoverable(self) -> bool:
        """Whether the tool implements ``recover``."""
        return type(self).recover is not BackgroundTool.recover

    @property
    def resumable(self) -> bool:
        """Whether the tool implements ``resume``."""
        return type(self).resume is not BackgroundTool.resume


def outcome_of(value: Any) -> Outcome:
    """An operation's return value as an ``Outcome`` (plain values complete it)."""
    return value if isinstance(value, Outcome) else Outcome(status="completed", output=value)
