"""Every error a user can catch derives from SteadyrunError and is drawn in the tree.

The tree in ``steadyrun._errors``'s docstring is what users read to know what to catch; this
walks every module of the package, so a new error class (or a new base) cannot go unnoticed.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import re
from types import ModuleType

import pytest

import steadyrun
from steadyrun import _errors

# Raised by tools or hosts for the runtime to catch (or by checks for the test runner): they
# are signals, not errors, and the docstring says so by name.
SIGNALS = {
    "steadyrun.control.ControlSignal",
    "steadyrun.control.AwaitExternal",
    "steadyrun.control.Detach",
    "steadyrun.control.InputRequired",
    "steadyrun.control.Complete",
    "steadyrun.control.HostFailure",
    "steadyrun.control.CallRejected",
    "steadyrun.testing.conformance._runner.CheckSkipped",
}

# Raised and caught inside one module or package: never reach a user, never exported.
INTERNAL = {
    "steadyrun._cli_errors.CommandFailed",
    "steadyrun._demo._story.DemoFailure",
    "steadyrun._fast_json._Unsupported",
    "steadyrun._sqlite_thread._Busy",
    "steadyrun.models._local_engine.Stopped",
    "steadyrun.models.anthropic._StreamingRequired",
    "steadyrun.runtime._input.TurnLimit",
    "steadyrun.service._worker._Drained",
    "steadyrun.temporal._wstore.ContinueAsNew",
}


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(steadyrun.__path__, "steadyrun.")]
    return ["steadyrun", *(n for n in names if not n.endswith("__main__"))]


# Extras that the README's test command does not install (CI installs them before it runs):
# a module that needs one is left out here when it is missing.
OPTIONAL = {"llama_cpp"}


def _imported(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name in OPTIONAL:
            return None
        raise


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = _imported(name)
        if module is None:
            continue
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("steadyrun")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def _public_exports() -> set[type[BaseException]]:
    exported: set[type[BaseException]] = set()
    for name in _modules():
        if any(part.startswith("_") for part in name.split(".")):
            continue
        module = _imported(name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr, None)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                exported.add(obj)
    return exported


def _drawn_tree() -> dict[str, str | None]:
    """Each class name drawn in the docstring, with the name it is drawn under."""
    doc = _errors.__doc__ or ""
    parents: dict[str, str | None] = {"SteadyrunError": None}
    stack = ["SteadyrunError"]
    for line in doc.splitlines():
        match = re.match(r"^(\s*(?:[│ ]   )*)[├└]── (\w+)", line)
        if match is None:
            continue
        depth = len(match.group(1).strip("\n")) // 4 - 1  # the tree is indented by 4
        name = match.group(2)
        assert name not in parents, f"{name} is drawn twice"
        del stack[depth + 1 :]
        parents[name] = stack[-1]
        stack.append(name)
    return parents


def test_every_catchable_error_derives_from_the_root_and_is_in_the_drawn_tree() -> None:
    classes = _exception_classes()
    assert set(SIGNALS | INTERNAL) <= set(classes), "an allowed exception no longer exists"
    errors = {k: v for k, v in classes.items() if k not in SIGNALS | INTERNAL}
    outside = sorted(k for k, v in errors.items() if not issubclass(v, steadyrun.SteadyrunError))
    assert outside == [], f"not under SteadyrunError: {outside}"

    drawn = _drawn_tree()
    by_name = {cls.__name__: cls for cls in errors.values()}
    assert len(by_name) == len(errors), "two error classes share a name"
    missing = sorted(set(by_name) - set(drawn))
    assert missing == [], f"not drawn in steadyrun._errors' tree: {missing}"
    unknown = sorted(set(drawn) - set(by_name))
    assert unknown == [], f"drawn but not defined: {unknown}"
    for name, parent in drawn.items():
        if parent is not None:
            assert by_name[parent] in by_name[name].__bases__, f"{name} is drawn under {parent}"


def test_signals_are_named_by_the_docstring_and_internal_exceptions_are_not_exported() -> None:
    doc = _errors.__doc__ or ""
    for qualified in SIGNALS:
        assert qualified.rpartition(".")[2] in doc, f"{qualified} is not named as a signal"
    classes = _exception_classes()
    leaked = sorted(k for k in INTERNAL if classes[k] in _public_exports())
    assert leaked == [], f"internal exceptions exported: {leaked}"


def test_a_missing_call_is_a_typed_error_and_still_a_key_error() -> None:
    exc = steadyrun.CallNotFoundError("r", "c9")
    assert isinstance(exc, steadyrun.UnknownCallError)
    assert isinstance(exc, KeyError)  # what stores raised before: `except KeyError` still works
    assert str(exc) == "no call 'c9' in run 'r'"  # not KeyError's quoted repr
    again = pickle.loads(pickle.dumps(exc))
    assert (type(again), again.run_id, again.call_id, str(again)) == (
        steadyrun.CallNotFoundError,
        "r",
        "c9",
        str(exc),
    )


async def test_result_call_of_an_unknown_id_is_call_not_found() -> None:
    from steadyrun.testing import ScriptedModel, text

    agent = steadyrun.Agent(name="a", model=ScriptedModel([text("hi")]))
    result = await steadyrun.Runtime(steadyrun.MemoryStore()).run(agent, run_id="r", input="x")
    with pytest.raises(steadyrun.CallNotFoundError, match="no call 'm9.c1' in run 'r'"):
        result.call("m9.c1")


class _FeedLosesInput(steadyrun.MemoryStore):
    """A store whose feed says nothing is pending, though the run's input was appended."""

    async def pending(self, run_id: str, after: int) -> int:
        return 0


class _LogLosesAMessage(steadyrun.MemoryStore):
    """A store whose context log comes back one message short of the checkpoint."""

    async def load(self, run_id: str):  # type: ignore[no-untyped-def]
        snap = await super().load(run_id)
        if snap is not None and snap.context:
            snap.context.pop()
        return snap


async def test_a_store_that_lost_the_first_input_is_a_store_error() -> None:
    from steadyrun.testing import ScriptedModel, text

    agent = steadyrun.Agent(name="a", model=ScriptedModel([text("hi")]))
    with pytest.raises(steadyrun.StoreError, match="input"):
        await steadyrun.Runtime(_FeedLosesInput()).run(agent, run_id="r", input="x")


async def test_a_store_that_lost_part_of_the_log_is_a_store_error() -> None:
    from steadyrun.testing import ScriptedModel, text

    store = _LogLosesAMessage()
    agent = steadyrun.Agent(name="a", model=ScriptedModel([text("hi"), text("again")]))
    await steadyrun.Runtime(store).run(agent, run_id="r", input="x")
    with pytest.raises(steadyrun.StoreError, match="lost part of the log"):
        await steadyrun.Runtime(store, agents=[agent]).resume("r")
