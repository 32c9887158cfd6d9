"""Extensions: the extension interface and the built-in extensions.

An extension adds instruction text, tools, model and tool middleware, state saved with the run,
and observers to every run of an agent: ``Agent(..., extensions=[Planning(), SubAgents()])``.
See docs/extensions.md for writing your own.
"""

from steadyrun.extensions.deferred import DeferredTools
from steadyrun.extensions.planning import PlanItem, Planning, TaskStatus
from steadyrun.extensions.subagents import Delegate, SubAgentFailed, SubAgents
from steadyrun.runtime._extension import (
    BatchNext,
    Extension,
    ModelCall,
    ModelNext,
    ToolBatch,
    ToolCall,
    ToolNext,
    TurnView,
)
from steadyrun.runtime._handle import RunHandle, child_run_id

__all__ = [
    "BatchNext",
    "DeferredTools",
    "Delegate",
    "Extension",
    "ModelCall",
    "ModelNext",
    "PlanItem",
    "Planning",
    "RunHandle",
    "SubAgentFailed",
    "SubAgents",
    "TaskStatus",
    "ToolBatch",
    "ToolCall",
    "ToolNext",
    "TurnView",
    "child_run_id",
]
