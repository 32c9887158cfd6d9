"""What a model response admits, by its finish reason: the rule of the loop's ``model`` phase.

A pure function of the response (and of ``Agent(correct_length_cut=...)``), so the loop only
carries out what it says:

=================================  ======================  ===================================
finish reason                      tool calls              admitted as
=================================  ======================  ===================================
``tool_calls``                     some                    ``batch``: the calls are queued
``length``                         some                    ``length_cut``: a correction, no
                                                           call runs
``length`` (correct_length_cut)    none                    ``length_cut``: a correction
anything else                      some                    ``calls_refused``: the run fails
``content_filter``                 none                    ``content_filter``: the run fails
``error``                          none                    ``error``: the run fails
``stop``, ``length``, ``None`` …   none                    ``answer``: the turn's answer
=================================  ======================  ===================================
"""

from __future__ import annotations

from typing import Literal

from steadyrun._errors import ContentFiltered, InvalidModelOutput, ModelCallFailed, RunFailure
from steadyrun.chat import ModelResponse

__all__ = ["Admission", "Refusal", "admit_by_finish", "refusal"]

Admission = Literal["batch", "length_cut", "calls_refused", "content_filter", "error", "answer"]
"""How the loop takes a response; see the module's table."""

Refusal = Literal["calls_refused", "content_filter", "error"]
"""The admissions that fail the run."""


def admit_by_finish(response: ModelResponse, *, correct_length_cut: bool) -> Admission:
    """How the loop takes ``response``, by its finish reason and tool calls.

    Args:
        response: The model's response.
        correct_length_cut: ``Agent.correct_length_cut``: a text answer cut by the length
            limit is corrected instead of delivered.

    Returns:
        The row of the module's table the response falls in.
    """
    calls = response.message.tool_calls
    finish = response.finish_reason
    if calls and finish == "tool_calls":
        return "batch"
    if finish == "length" and (calls or correct_length_cut):
        return "length_cut"
    if calls:  # only 'tool_calls' executes tools: a provider's other reasons are not a request
        return "calls_refused"
    if finish == "content_filter":
        return "content_filter"
    if finish == "error":
        return "error"
    return "answer"


def refusal(admission: Refusal, model_call_id: str, response: ModelResponse) -> RunFailure:
    """The failure a refused response ends the run with, saying what happened."""
    if admission == "calls_refused":
        return InvalidModelOutput(
            f"model call {model_call_id} asked for {len(response.message.tool_calls)} tool "
            f"call(s) with finish reason {response.finish_reason!r}; only 'tool_calls' executes "
            "tools, so none ran"
        )
    if admission == "content_filter":
        return ContentFiltered(f"model call {model_call_id} was stopped by a content filter")
    return ModelCallFailed(f"model call {model_call_id} ended with finish reason 'error'")
