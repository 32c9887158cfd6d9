"""Background tools: long tool calls that outlive the turn, the process and the worker.

A ``BackgroundTool`` starts an ``Operation``; a ``TaskManager`` runs a call in the foreground
first and, past the tool's foreground timeout, adopts the same operation into a durable
``Task`` (never starting it again), works tasks with leases, recovers them after a worker dies,
and tells the run when a task ends. See docs/background.md.
"""

from steadyrun.background._manager import TaskManager
from steadyrun.background._model import (
    TASK_FORMAT,
    Outcome,
    Task,
    TaskInput,
    TaskStatus,
    Update,
    task_id_of,
)
from steadyrun.background._progress import Materializer, render_progress
from steadyrun.background._sql import TASK_SCHEMA_VERSION, PostgresTaskStore, SqliteTaskStore
from steadyrun.background._store import MemoryTaskStore, TaskStore
from steadyrun.background._tool import AdoptionView, BackgroundTool, Operation, TaskRef

__all__ = [
    "TASK_FORMAT",
    "TASK_SCHEMA_VERSION",
    "AdoptionView",
    "BackgroundTool",
    "Materializer",
    "MemoryTaskStore",
    "Operation",
    "Outcome",
    "PostgresTaskStore",
    "SqliteTaskStore",
    "Task",
    "TaskInput",
    "TaskManager",
    "TaskRef",
    "TaskStatus",
    "TaskStore",
    "Update",
    "render_progress",
    "task_id_of",
]
