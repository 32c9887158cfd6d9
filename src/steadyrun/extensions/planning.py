"""Planning: a task list the model keeps through tools, saved with the run, shown as its plan."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from steadyrun._codec import from_plain, to_plain
from steadyrun._texts import Texts, default_texts, texts_of
from steadyrun.runtime._extension import Extension, RunHandle, TurnView
from steadyrun.tools import Tool, ToolContext, tool

__all__ = ["PlanItem", "Planning", "TaskStatus"]

TaskStatus = Literal["pending", "in_progress", "completed", "cancelled"]
"""The status of one task of a plan."""

_STATUSES = ("pending", "in_progress", "completed", "cancelled")


@dataclass(kw_only=True, slots=True)
class PlanItem:
    """One task of a run's plan.

    Attributes:
        id: ``t1``, ``t2``... in creation order; never reused.
        title: What the task is.
        status: See ``TaskStatus``.
        notes: What the model wrote about it (progress, outcome).
    """

    id: str
    title: str
    status: TaskStatus = "pending"
    notes: str = ""


@dataclass(slots=True)
class _Plan:
    items: list[PlanItem] = field(default_factory=list)
    next_id: int = 1


class Planning(Extension):
    """A task list the main agent keeps with ``create_task``, ``update_task``, ``get_task``...

    The tools are ``create_task``, ``update_task``, ``get_task`` and ``list_tasks``.
    The plan is saved with the run's checkpoint (and with the record of the call that changed
    it, so a crash between the two loses nothing), shown to the model in its instructions, and
    published as ``RunResult.plan``. Sub-agents do not see the planning tools. What the model
    reads is in the runtime's ``Texts`` (``planning_*``, ``plan_*``).

    Args:
        max_tasks: Tasks a plan may hold; creating more fails with a reason the model sees.
        show_in_instructions: Whether the current plan is appended to the instructions.
    """

    name = "planning"

    def __init__(self, *, max_tasks: int = 50, show_in_instructions: bool = True) -> None:
        self.max_tasks = max_tasks
        self.show_in_instructions = show_in_instructions
        self._plan = _Plan()
        self._lock = asyncio.Lock()
        self.texts: Texts = default_texts()

    def for_run(self) -> Planning:
        """A new, empty plan for one run."""
        return Planning(max_tasks=self.max_tasks, show_in_instructions=self.show_in_instructions)

    def attach(self, handle: RunHandle) -> None:
        """Take the run's texts (the sentences the model reads)."""
        self.texts = texts_of(handle)

    # -- state -------------------------------------------------------------------------------

    def save_state(self) -> Any:
        """The plan as plain data."""
        return {"next_id": self._plan.next_id, "items": to_plain(self._plan.items, list[PlanItem])}

    def restore_state(self, state: Any) -> None:
        """Load a saved plan (``None``: an empty one)."""
        if state is None:
            self._plan = _Plan()
            return
        items = from_plain(state["items"], list[PlanItem])
        self._plan = _Plan(items=items, next_id=int(state["next_id"]))

    def publish(self) -> list[PlanItem] | None:
        """The plan's tasks (copies), or ``None`` while it has none."""
        if not self._plan.items:
            return None
        return [
            PlanItem(id=i.id, title=i.title, status=i.status, notes=i.notes)
            for i in self._plan.items
        ]

    @property
    def items(self) -> list[PlanItem]:
        """The tasks of this run's plan (the live list; do not change it)."""
        return self._plan.items

    def instructions(self, view: TurnView) -> str | None:
        """The planning rules and, when enabled, the current plan."""
        if view.subagent:
            return None
        texts = self.texts
        text = texts.planning_instructions
        if self.show_in_instructions and self._plan.items:
            plan = _render(self._plan.items)
            text += "\n" + texts.planning_current_plan.format(plan=plan)
        return text

    # -- operations (also the tools' bodies) -------------------------------------------------

    async def create(self, title: str) -> PlanItem:
        """Add a task; ``ValueError`` when the plan is full or the title blank."""
        texts = self.texts
        title = title.strip()
        if not title:
            raise ValueError(texts.plan_needs_title)
        async with self._lock:
            if len(self._plan.items) >= self.max_tasks:
                raise ValueError(texts.plan_full.format(max_tasks=str(self.max_tasks)))
            item = PlanItem(id=f"t{self._plan.next_id}", title=title)
            self._plan.next_id += 1
            self._plan.items.append(item)
            return item

    async def update(
        self,
        task_id: str,
        *,
        status: TaskStatus | None = None,
        title: str | None = None,
        notes: str | None = None,
    ) -> PlanItem:
        """Change a task; ``KeyError`` for an unknown id, ``ValueError`` for a bad status."""
        async with self._lock:
            item = self._get(task_id)
            if status is not None:
                if status not in _STATUSES:
                    statuses = ", ".join(_STATUSES)
                    raise ValueError(self.texts.plan_bad_status.format(statuses=statuses))
                item.status = status
            if title is not None and title.strip():
                item.title = title.strip()
            if notes is not None:
                item.notes = notes
            return item

    def get(self, task_id: str) -> PlanItem:
        """One task; ``KeyError`` for an unknown id."""
        return self._get(task_id)

    def _get(self, task_id: str) -> PlanItem:
        for item in self._plan.items:
            if item.id == task_id:
                return item
        texts = self.texts
        known = ", ".join(i.id for i in self._plan.items) or texts.plan_no_tasks
        raise KeyError(texts.plan_unknown_task.format(task_id=task_id, known=known))

    # -- tools -------------------------------------------------------------------------------

    def tools(self) -> Sequence[Tool]:
        """``create_task``, ``update_task``, ``get_task``, ``list_tasks`` (main agent only)."""
        ext = self

        @tool(main_only=True, side_effects=False, retain="keep")
        async def create_task(title: str, ctx: ToolContext) -> str:
            """Add a task to the plan.

            Args:
                title: What the task is, in a few words.
                ctx: The call's context, filled by the runtime.
            """
            item = await ext.of(ctx).create(title)
            return ctx.texts.plan_created.format(task_id=item.id, title=item.title)

        @tool(main_only=True, side_effects=False, retain="keep")
        async def update_task(
            task_id: str,
            ctx: ToolContext,
            status: TaskStatus | None = None,
            title: str | None = None,
            notes: str | None = None,
        ) -> str:
            """Change a task of the plan.

            Args:
                task_id: The task (``t1``, ``t2``...).
                status: pending, in_progress, completed or cancelled.
                title: A new title.
                notes: Progress or outcome, replacing earlier notes.
                ctx: The call's context, filled by the runtime.
            """
            item = await ext.of(ctx).update(task_id, status=status, title=title, notes=notes)
            return ctx.texts.plan_updated.format(
                task_id=item.id, status=item.status, title=item.title
            )

        @tool(main_only=True, replayable=True, side_effects=False)
        async def get_task(task_id: str, ctx: ToolContext) -> str:
            """Show one task of the plan.

            Args:
                task_id: The task (``t1``, ``t2``...).
                ctx: The call's context, filled by the runtime.
            """
            item = ext.of(ctx).get(task_id)
            notes = "\n" + ctx.texts.plan_task_notes.format(notes=item.notes) if item.notes else ""
            return f"{item.id} [{item.status}] {item.title}{notes}"

        @tool(main_only=True, replayable=True, side_effects=False)
        async def list_tasks(ctx: ToolContext) -> str:
            """Show the whole plan.

            Args:
                ctx: The call's context, filled by the runtime.
            """
            items = ext.of(ctx).items
            return _render(items) if items else ctx.texts.plan_empty

        return (create_task, update_task, get_task, list_tasks)


def _render(items: list[PlanItem]) -> str:
    return "\n".join(f"- {i.id} [{i.status}] {i.title}" for i in items)
