"""The run: agents, limits, the loop, recovery, observers and results."""

from steadyrun._errors import StepNotFoundError
from steadyrun._texts import Texts
from steadyrun.runtime._agent import Agent, Limits
from steadyrun.runtime._budgets import Budget, BudgetStatus, Price, Spent
from steadyrun.runtime._completion import (
    Accept,
    CompletionFallback,
    CompletionValidator,
    Correct,
    FallbackReason,
    Finish,
    Guard,
    GuardView,
    Verdict,
)
from steadyrun.runtime._events import (
    HandoverPending,
    ModelCallSettled,
    ModelCallStarted,
    RunCompleted,
    RunEvent,
    RunFailed,
    RunStarted,
    RunStream,
    RunSuspended,
    TextDelta,
    ThinkingDelta,
    ToolArgumentsDelta,
    ToolCallSettled,
    ToolCallStarted,
    UsageReported,
)
from steadyrun.runtime._fork import ForkedRun, HistoryCall, HistoryStep
from steadyrun.runtime._observers import Observer
from steadyrun.runtime._recovery import (
    apply_answers,
    blocks_run,
    interrupted_outcome,
    needs_recovery,
    settle_interrupted,
)
from steadyrun.runtime._result import RunResult
from steadyrun.runtime._runtime import PendingItem, Runtime
from steadyrun.runtime._sync import run_sync
from steadyrun.runtime._versions import AgentFingerprint, agent_fingerprint, tool_version

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
    "AgentFingerprint",
    "Budget",
    "BudgetStatus",
    "CompletionFallback",
    "CompletionValidator",
    "Correct",
    "FallbackReason",
    "Finish",
    "Guard",
    "GuardView",
    "ForkedRun",
    "HistoryCall",
    "HistoryStep",
    "Limits",
    "Observer",
    "PendingItem",
    "Price",
    "RunResult",
    "Runtime",
    "Spent",
    "StepNotFoundError",
    "Texts",
    "Verdict",
    "agent_fingerprint",
    "apply_answers",
    "blocks_run",
    "interrupted_outcome",
    "needs_recovery",
    "run_sync",
    "settle_interrupted",
    "tool_version",
]
