"""Control-flow signals a tool raises to hand its call over. They are not errors.

``await_external(payload)`` suspends the run after the current batch until the host records the
call's result with ``Runtime.settle``. Further signals (detach, confirm, input requests,
completions) build on the same mechanism.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["AwaitExternal", "ControlSignal", "await_external"]


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


def await_external(payload: Any = None) -> NoReturn:
    """Hand the current call to the host and suspend the run after this batch.

    The record becomes ``waiting`` with handover ``await`` and keeps ``payload``. The host
    records the outcome with ``Runtime.settle(run_id, call_id, result=...)`` and resumes.
    """
    raise AwaitExternal(payload)
