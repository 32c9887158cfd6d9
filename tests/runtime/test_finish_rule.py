"""The model phase's admission rule: every finish reason, with and without tool calls."""

from __future__ import annotations

import pytest

from steadyrun._errors import ContentFiltered, InvalidModelOutput, ModelCallFailed
from steadyrun.chat import FinishReason
from steadyrun.runtime._finish_rule import Admission, admit_by_finish, refusal
from steadyrun.testing import text, tool_calls

REASONS: list[FinishReason] = ["stop", "tool_calls", "length", "content_filter", "error"]

# (finish reason, has tool calls, correct_length_cut) -> admitted as; the module's table.
EXPECTED: dict[tuple[FinishReason, bool], Admission] = {
    ("tool_calls", True): "batch",
    ("length", True): "length_cut",
    ("stop", True): "calls_refused",
    ("content_filter", True): "calls_refused",
    ("error", True): "calls_refused",
    ("stop", False): "answer",
    ("tool_calls", False): "answer",
    ("length", False): "answer",
    ("content_filter", False): "content_filter",
    ("error", False): "error",
}


@pytest.mark.parametrize("finish", REASONS)
@pytest.mark.parametrize("calls", [True, False])
@pytest.mark.parametrize("correct", [True, False])
def test_each_finish_reason_is_admitted_as_the_table_says(
    finish: FinishReason, calls: bool, correct: bool
) -> None:
    response = tool_calls(("t", {}), finish=finish) if calls else text("hi", finish=finish)
    expected = EXPECTED[finish, calls]
    if correct and finish == "length" and not calls:
        expected = "length_cut"  # a cut answer is corrected only where the agent asks
    assert admit_by_finish(response, correct_length_cut=correct) == expected


def test_a_refusal_names_the_model_call_and_what_it_did() -> None:
    asked = tool_calls(("a", {}), ("b", {}), finish="stop")
    failure = refusal("calls_refused", "m3", asked)
    assert isinstance(failure, InvalidModelOutput)
    assert str(failure) == (
        "model call m3 asked for 2 tool call(s) with finish reason 'stop'; only 'tool_calls' "
        "executes tools, so none ran"
    )
    filtered = refusal("content_filter", "m1", text("", finish="content_filter"))
    assert isinstance(filtered, ContentFiltered) and "m1" in str(filtered)
    errored = refusal("error", "m2", text("", finish="error"))
    assert isinstance(errored, ModelCallFailed) and "finish reason 'error'" in str(errored)
