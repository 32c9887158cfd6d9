"""How the ``steadyrun`` command reports errors: an exit code and a line in its own terms.

The library speaks to Python callers ("pass Runtime(store, agents=[...])", "start it with
Runtime.run()"); a person at a shell holds a command line, not a ``Runtime``. So errors are
mapped here, once, on their way out:

- ``CommandLineError``: the command line is wrong (an option, ``--app``/``--store``, a SQLite
  file that is not there, an agent the app does not have): exit 2.
- a plain ``UsageError`` raised by an operation (the call was wrong, whatever the run's state):
  exit 2, its Python advice replaced by the option that fixes it.
- ``RunNotFoundError``: exit 1, naming the store looked in and ``steadyrun runs start``;
  ``RunBusyError``: exit 1, pointing at ``runs tail`` and ``runs send``.
- every other ``SteadyrunError`` (a conflict, a call not pending, a run busy or cancelled...):
  exit 1, the error's class named so scripts can tell them apart.
"""

from __future__ import annotations

import re

from steadyrun._errors import RunBusyError, RunNotFoundError, SteadyrunError, UsageError

__all__ = ["USAGE", "CommandFailed", "CommandLineError", "busy", "explain"]

USAGE = 2
"""The exit code of a wrong command line."""

# The advice library messages give to Python callers, and what a CLI user does instead.
_PYTHON_ADVICE = re.compile(
    r"\s*[(:;,]?\s*pass (?:agent=\.\.\. or )?Runtime\(store, agents=\[\.\.\.\]\)\)?"
)


class CommandLineError(UsageError):
    """The command line is wrong: an option, ``--app``/``--store``, a missing file (exit 2)."""


class CommandFailed(Exception):  # noqa: N818 - an outcome carried to main(), not a bug
    """An error already put in the command's terms, with its exit code.

    Attributes:
        code: The exit code.
        message: The line printed on stderr (after ``steadyrun: ``).
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def busy(exc: RunBusyError) -> str:
    """Who executes the run, in the command's terms."""
    until = f" until {exc.expires_at.isoformat()} unless renewed" if exc.expires_at else ""
    return (
        f"run {exc.run_id!r} is executing in {exc.owner!r} (its claim holds{until}); follow it "
        f"with `steadyrun runs tail {exc.run_id}`, give it input with `steadyrun runs send`"
    )


def explain(
    exc: SteadyrunError, *, where: str = "this store", app: str | None = None
) -> CommandFailed:
    """``exc`` in the command's terms: the store looked in is ``where``, ``app`` the ``--app``."""
    if isinstance(exc, RunNotFoundError):
        return CommandFailed(
            1,
            f"RunNotFoundError: no run {exc.run_id!r} in {where}; start one with "
            "`steadyrun runs start`",
        )
    if type(exc) is RunBusyError:
        return CommandFailed(1, f"RunBusyError: {busy(exc)}")
    if isinstance(exc, CommandLineError):
        return CommandFailed(USAGE, str(exc))
    if type(exc) is UsageError:
        fix = f": --app {app} does not have it" if app else ": name the app that has it with --app"
        message, advised = _PYTHON_ADVICE.subn("", str(exc))
        message = message.replace("this runtime", "the command")
        return CommandFailed(USAGE, message + fix if advised else message)
    return CommandFailed(1, f"{type(exc).__name__}: {exc}")
