"""Context management: token counting, offloading, clearing, summaries, a reducer hook."""

from steadyrun.context._manager import ContextEvent, ContextManager
from steadyrun.context._policy import DEFAULT_SUMMARY_INSTRUCTION, ContextPolicy
from steadyrun.context._read_tool import READ_TOOL, read_tool
from steadyrun.context._rounds import (
    CALLS_META,
    CLEARED_META,
    OFFLOADED_META,
    SUMMARY_META,
    clear_rounds,
    is_cleared,
    is_offloaded,
    mark,
    offload_text,
    result_key,
    rounds,
    split_for_summary,
    transcript,
    verbatim_refs,
)
from steadyrun.context._tokens import (
    CachedCounter,
    EstimateCounter,
    ProviderCounter,
    TiktokenCounter,
    TokenCounter,
    count_tokens,
    estimate_message,
    estimate_request,
)

__all__ = [
    "CALLS_META",
    "CLEARED_META",
    "DEFAULT_SUMMARY_INSTRUCTION",
    "OFFLOADED_META",
    "READ_TOOL",
    "SUMMARY_META",
    "CachedCounter",
    "ContextEvent",
    "ContextManager",
    "ContextPolicy",
    "EstimateCounter",
    "ProviderCounter",
    "TiktokenCounter",
    "TokenCounter",
    "clear_rounds",
    "count_tokens",
    "estimate_message",
    "estimate_request",
    "is_cleared",
    "is_offloaded",
    "mark",
    "offload_text",
    "read_tool",
    "result_key",
    "rounds",
    "split_for_summary",
    "transcript",
    "verbatim_refs",
]
