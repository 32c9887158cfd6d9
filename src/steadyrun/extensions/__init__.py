"""Extensions: the extension interface and the built-in extensions.

An extension adds instruction text, tools, model and tool middleware, state saved with the run,
and observers to every run of an agent: ``Agent(..., extensions=[Planning(), SubAgents()])``.
See docs/extensions.md for writing your own.
"""

from typing import TYPE_CHECKING, Any

from steadyrun.extensions.deferred import DeferredTools
from steadyrun.extensions.memory import (
    InMemoryMemoryBank,
    Memory,
    MemoryBank,
    MemoryItem,
    ScoredMemory,
    SqliteMemoryBank,
    minilm_embedder,
)
from steadyrun.extensions.planning import PlanItem, Planning, TaskStatus
from steadyrun.extensions.skills import Skill, Skills
from steadyrun.extensions.subagents import Delegate, SubAgentFailed, SubAgents
from steadyrun.runtime._extension import (
    BatchNext,
    Extension,
    ModelCall,
    ModelNext,
    RunHandle,
    ToolBatch,
    ToolCall,
    ToolNext,
    TurnView,
)
from steadyrun.runtime._handle import child_run_id

if TYPE_CHECKING:
    from steadyrun.extensions.mcp import McpError as McpError
    from steadyrun.extensions.mcp import McpServer as McpServer
    from steadyrun.extensions.mcp import McpToolError as McpToolError
    from steadyrun.extensions.mcp import McpTraits as McpTraits

__all__ = [
    "BatchNext",
    "DeferredTools",
    "Delegate",
    "Extension",
    "InMemoryMemoryBank",
    "Memory",
    "MemoryBank",
    "MemoryItem",
    "ModelCall",
    "ModelNext",
    "PlanItem",
    "Planning",
    "RunHandle",
    "ScoredMemory",
    "Skill",
    "Skills",
    "SqliteMemoryBank",
    "SubAgentFailed",
    "SubAgents",
    "TaskStatus",
    "ToolBatch",
    "ToolCall",
    "ToolNext",
    "TurnView",
    "child_run_id",
    "minilm_embedder",
]

_MCP = ("McpError", "McpServer", "McpToolError", "McpTraits")


def __getattr__(name: str) -> Any:
    # MCP needs the optional ``mcp`` SDK (pip install 'steadyrun[mcp]'): imported on first use.
    if name in _MCP:
        from steadyrun.extensions import mcp

        value = getattr(mcp, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, *_MCP])
