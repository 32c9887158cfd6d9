"""How a tool hands its call to people and systems. Signals here are not errors.

A tool body raises (through these functions) one of:

| function | the record | the run |
|---|---|---|
| ``await_external(payload)`` | ``waiting``, handover ``await`` | suspends after the batch until the host settles the call |
| ``detach(receipt, payload)`` | ``waiting``, handover ``detached`` | carries on; the model sees the receipt |
| ``require_input(prompt, schema, state)`` | ``awaiting_input`` with a wait id | suspends after the batch; the answer re-enters the tool |
| ``complete(value, fixed)`` | ``succeeded`` with the completion | ends the run with a structured value (completion tools) |

A tool's ``policy`` decides before the body runs: ``Submit(receipt, payload)`` hands the call to
the host's decision while the run carries on; ``Confirm(prompt)`` waits for a person's approval.
``HostFailure`` says the tool's outcome is unknown (the host failed); the call is settled like a
call interrupted by a crash.
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

__all__ = [
    "AwaitExternal",
    "CallPolicy",
    "CallRejected",
    "CallView",
    "Complete",
    "Confirm",
    "ControlSignal",
    "Detach",
    "HostFailure",
    "InputRequired",
    "Submit",
    "await_external",
    "complete",
    "detach",
    "require_input",
]


class ControlSignal(Exception):  # noqa: N818 - a signal, not an error
    """Base of the signals a tool raises to hand its call over; never an error of the tool.

    Tools that catch broad exceptions should re-raise these.
    """


class AwaitExternal(ControlSignal):
    """The tool's result will come from outside; the run suspends until the host settles it.

    Attributes:
        payload: JSON-compatible data for whoever produces the result (stored on the record).
    """

    def __init__(self, payload: Any = None) -> None:
        super().__init__(payload)
        self.payload = payload


class Detach(ControlSignal):
    """The call goes on outside the run; the model gets ``receipt`` now.

    Attributes:
        receipt: What the model sees as the call's result (an order number, a ticket id...).
        payload: JSON-compatible data for the outside executor.
    """

    def __init__(self, receipt: str, payload: Any = None) -> None:
        super().__init__(receipt, payload)
        self.receipt = receipt
        self.payload = payload


class InputRequired(ControlSignal):
    """The tool needs an answer from a person or system before it can go on.

    Attributes:
        prompt: What to ask.
        response_schema: JSON schema the answer must satisfy (``None``: any JSON value).
        state: JSON-compatible state handed back to the tool with the answer.
    """

    def __init__(
        self, prompt: str, response_schema: dict[str, Any] | None = None, state: Any = None
    ) -> None:
        super().__init__(prompt, response_schema, state)
        self.prompt = prompt
        self.response_schema = response_schema
        self.state = state


class Complete(ControlSignal):
    """A completion tool ends the run with ``value``.

    Attributes:
        value: The structured result of the run.
        fixed: A fixed completion ends the run even if new input is waiting; a non-fixed one is
            superseded by new input.
    """

    def __init__(self, value: Any, fixed: bool = False) -> None:
        super().__init__(value, fixed)
        self.value = value
        self.fixed = fixed


class HostFailure(Exception):
    """The outcome of the call is unknown because something the tool depends on failed.

    The call is settled as ``needs_review`` (side effects, not replayable) or ``interrupted``,
    exactly as if the process had crashed while it ran.
    """


class CallRejected(Exception):  # noqa: N818 - the host's answer, not a bug
    """A host refuses a submission or a pending decision as it is created.

    Raised by a journal's ``save_call`` or by ``Runtime(on_handover=...)``; the call is recorded
    ``rejected`` and the model sees ``reason``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def await_external(payload: Any = None) -> NoReturn:
    """Hand the current call to the host and suspend the run after this batch.

    The record becomes ``waiting`` with handover ``await`` and keeps ``payload``. The host
    records the outcome with ``Runtime.settle(run_id, call_id, result=...)`` and resumes.
    """
    raise AwaitExternal(payload)


def detach(receipt: str, payload: Any = None) -> NoReturn:
    """Let the call go on outside the run: the model gets ``receipt``; the run carries on.

    The record stays ``waiting`` with handover ``detached`` until the host settles it with
    ``Runtime.settle``; that never disturbs the run.
    """
    raise Detach(receipt, payload)


def require_input(
    prompt: str, response_schema: dict[str, Any] | None = None, state: Any = None
) -> NoReturn:
    """Ask a person or system for input; the run suspends after this batch.

    ``Runtime.answer(run_id, wait_id, response)`` validates the answer against
    ``response_schema``; on resume the same tool is called again with the same arguments and
    ``ctx.input_state`` / ``ctx.input_response`` set.
    """
    raise InputRequired(prompt, response_schema, state)


def complete(value: Any, fixed: bool = False) -> NoReturn:
    """End the run with a structured ``value`` (only in tools marked ``completion=True``)."""
    raise Complete(value, fixed)


@dataclass(kw_only=True, frozen=True, slots=True)
class CallView:
    """A call as a tool's ``policy`` sees it.

    Attributes:
        run_id: The run.
        call_id: The record id.
        name: The tool.
        arguments: The validated arguments.
    """

    run_id: str
    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True, slots=True)
class Submit:
    """Policy outcome: do not run the call; hand it to the host's decision.

    Attributes:
        receipt: What the model sees (e.g. "Refund request R-12 submitted for approval").
        payload: JSON-compatible data for the host.
    """

    receipt: str
    payload: Any = None


@dataclass(kw_only=True, frozen=True, slots=True)
class Confirm:
    """Policy outcome: wait for a person's approval before running the call.

    Attributes:
        prompt: What to show the person deciding.
        payload: JSON-compatible data for the host.
    """

    prompt: str = ""
    payload: Any = None


CallPolicy = Submit | Confirm | None
"""What a policy returns: ``None`` runs the call."""
