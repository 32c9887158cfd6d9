"""steadyrun: durable, resumable runs for LLM tool-calling agents.

Define tools with ``@tool``, an ``Agent`` with a model and tools, and run it with
``Runtime(store).run(agent, run_id=..., input=...)``. A run survives crashes, suspends while it
waits for the outside world, and resumes from its last checkpoint without repeating a side effect.
"""

from typing import TYPE_CHECKING, Any

from steadyrun._errors import (
    BudgetExceeded,
    CallNotFoundError,
    ConflictError,
    ContentFiltered,
    CorrectionsExhausted,
    EngineUnavailableError,
    ForeignEngineError,
    FormatVersionError,
    InvalidModelOutput,
    InvalidResponseError,
    IterationLimitExceeded,
    LimitExceeded,
    ModelCallFailed,
    ModelError,
    NotPendingError,
    RunBusyError,
    RunCancelledError,
    RunFailure,
    RunNotFoundError,
    ScriptExhaustedError,
    SteadyrunError,
    StoreError,
    SubAgentInterrupted,
    ToolDefinitionError,
    TurnLimitExceeded,
    UnknownCallError,
    UsageError,
)
from steadyrun._version import __version__
from steadyrun.chat import Message, ModelRequest, ModelResponse, Usage
from steadyrun.context import ContextPolicy
from steadyrun.models import ModelClient, StructuredOutputError, generate_object
from steadyrun.records import CallRecord
from steadyrun.runtime import (
    Accept,
    Agent,
    Budget,
    Correct,
    Finish,
    Guard,
    GuardView,
    HandoverPending,
    Limits,
    ModelCallSettled,
    ModelCallStarted,
    Observer,
    PendingItem,
    Price,
    RunCompleted,
    RunEvent,
    RunFailed,
    RunResult,
    RunStarted,
    RunStream,
    RunSuspended,
    Runtime,
    TextDelta,
    Texts,
    ThinkingDelta,
    ToolArgumentsDelta,
    ToolCallSettled,
    ToolCallStarted,
    UsageReported,
    run_sync,
)
from steadyrun.stores import MemoryStore, SqliteStore
from steadyrun.tools import Tool, ToolArgumentsError, ToolContext, tool

if TYPE_CHECKING:
    from steadyrun.stores import PostgresStore as PostgresStore

__all__ = [
    "HandoverPending",
    "ModelCallSettled",
    "ModelCallStarted",
    "RunCompleted",
    "RunEvent",
    "RunFailed",
    "RunStarted",
    "RunStream",
    "RunSuspended",
    "TextDelta",
    "ThinkingDelta",
    "ToolArgumentsDelta",
    "ToolCallSettled",
    "ToolCallStarted",
    "UsageReported",
    "Accept",
    "Agent",
    "Budget",
    "BudgetExceeded",
    "CallNotFoundError",
    "CallRecord",
    "ConflictError",
    "ContentFiltered",
    "ContextPolicy",
    "Correct",
    "CorrectionsExhausted",
    "Finish",
    "ForeignEngineError",
    "FormatVersionError",
    "Guard",
    "GuardView",
    "InvalidModelOutput",
    "InvalidResponseError",
    "IterationLimitExceeded",
    "LimitExceeded",
    "Limits",
    "MemoryStore",
    "Message",
    "ModelCallFailed",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "NotPendingError",
    "Observer",
    "PendingItem",
    "Price",
    "RunBusyError",
    "RunCancelledError",
    "RunFailure",
    "RunNotFoundError",
    "RunResult",
    "Runtime",
    "ScriptExhaustedError",
    "SqliteStore",
    "SteadyrunError",
    "EngineUnavailableError",
    "StoreError",
    "StructuredOutputError",
    "SubAgentInterrupted",
    "Texts",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolDefinitionError",
    "TurnLimitExceeded",
    "UnknownCallError",
    "Usage",
    "UsageError",
    "__version__",
    "generate_object",
    "run_sync",
    "tool",
]


def __getattr__(name: str) -> Any:
    # PostgresStore needs the optional psycopg: imported on first access only.
    if name == "PostgresStore":
        from steadyrun import stores

        value = stores.PostgresStore
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # Listed for discovery, but kept out of __all__: ``import *`` must work without psycopg.
    return sorted([*__all__, "PostgresStore"])
