"""The ``@tool`` decorator and the ``Tool`` it returns."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeAlias, overload

from steadyrun._errors import ToolDefinitionError, UsageError
from steadyrun.chat import ToolDefinition
from steadyrun.tools._arguments import validate_arguments
from steadyrun.tools._context import ToolContext
from steadyrun.tools._names import validate_tool_name
from steadyrun.tools._render import render_result
from steadyrun.tools._signature import Binding, analyse_function
from steadyrun.tools._threads import Pace, run_in_thread

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "ConcurrencyKey", "Policy", "Retain", "Tool", "tool"]

DEFAULT_MAX_RESULT_CHARS = 100_000
"""Most characters of a tool's result the model sees by default (about 25,000 tokens by the
estimate of 4 bytes a token): larger results are offloaded or truncated with a note."""

Retain: TypeAlias = Literal["default", "keep", "intact"]
"""How the runtime treats a tool's results when it trims history."""

ConcurrencyKey: TypeAlias = str | Callable[[dict[str, Any]], str | None] | None
"""When a tool's calls may overlap: ``None`` (alone), a constant key, or a function of the args."""

_RETAIN_VALUES = ("default", "keep", "intact")
_BOOL_TRAITS = (
    "replayable",
    "side_effects",
    "direct_result",
    "main_only",
    "strict",
    "completion",
    "inline",
)

Policy: TypeAlias = Callable[[Any], Any]
"""A function of a ``steadyrun.control.CallView`` returning ``None`` (run the call),
``steadyrun.control.Submit`` or ``steadyrun.control.Confirm``."""


@dataclass(kw_only=True, frozen=True, slots=True, eq=False)
class Tool:
    """A function the model can call, with its schema and runtime traits.

    Create tools with ``@tool``; it checks the function and builds everything below.

    Attributes:
        name: Provider-safe name the model calls the tool by.
        description: What the tool does, as the model reads it.
        parameters: JSON schema of the arguments object.
        function: The decorated function (sync or async).
        replayable: Whether a call may simply run again when a resume finds it unfinished.
        side_effects: Whether the tool may change the world outside the run. True unless
            declared ``False``: a call cut off by a crash is then ``needs_review``, since an
            undeclared tool may have taken effect.
        concurrency_key: When calls may overlap; see ``schedule``.
        direct_result: Whether the result ends the turn as the answer, without another model call.
        retain: How the runtime keeps the tool's results when it trims history.
        main_only: Whether only the main agent (not sub-agents) may use the tool.
        strict: Whether providers should enforce the schema exactly, where they can.
        completion: Whether the tool ends the run with a structured value (its result, or
            ``steadyrun.control.complete(value, fixed=...)``).
        policy: Decides per call, before it runs, whether it runs, is submitted to the host,
            or waits for a person's confirmation.
        timeout: Seconds a call may run; past it the call is settled as interrupted (or
            needs review, when it has side effects).
        max_result_chars: Most characters of a result the model sees (``None``: no bound).
            A longer result is offloaded where the agent has a context policy (and the tool
            is not ``retain="intact"``), and truncated with a note otherwise; the call's
            record keeps it whole.
        inline: Whether a sync function runs on the event loop itself instead of a worker
            thread: for bodies that never block (a computation of microseconds), where the
            hand-off to a thread would cost more than the body. A blocking inline body stalls
            every run of the process; it cannot have a ``timeout``.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    replayable: bool = False
    side_effects: bool = True
    concurrency_key: ConcurrencyKey = None
    direct_result: bool = False
    retain: Retain = "default"
    main_only: bool = False
    strict: bool = False
    completion: bool = False
    policy: Policy | None = None
    timeout: float | None = None
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS
    inline: bool = False
    _binding: Binding = field(repr=False)
    _definition: ToolDefinition = field(init=False, repr=False)
    _pace: Pace = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Checked again here so dataclasses.replace() cannot produce an invalid tool.
        problems = validate_tool_name(self.name) + _trait_problems(
            description=self.description,
            concurrency_key=self.concurrency_key,
            retain=self.retain,
            bools={t: getattr(self, t) for t in _BOOL_TRAITS},
            policy=self.policy,
            timeout=self.timeout,
            max_result_chars=self.max_result_chars,
            inline_async=self.inline is True and self._binding.is_async,
        )
        if problems:
            raise ToolDefinitionError(str(self.name), problems)
        if self.function is not self._binding.function:
            # The argument model and call binding were built for the original function.
            raise UsageError("a tool's function cannot be swapped; make a new tool with tool()")
        definition = ToolDefinition(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            strict=self.strict,
        )
        object.__setattr__(self, "_definition", definition)
        object.__setattr__(self, "_pace", Pace())

    @property
    def runs_in_thread(self) -> bool:
        """Whether ``invoke`` runs the body in a worker thread (a sync function, not ``inline``).

        Such a body runs in a copy of the caller's context variables whatever task awaits it.
        """
        return not self.inline and not self._binding.is_async

    def definition(self) -> ToolDefinition:
        """The tool as the model sees it; the same (not to be mutated) object on every call."""
        return self._definition

    def validate(self, arguments: str) -> dict[str, Any]:
        """Parse and validate the raw argument JSON the model wrote.

        Args:
            arguments: The JSON text of the call's arguments; blank text counts as ``{}``.

        Returns:
            The argument values by parameter name, defaults filled in. Nested pydantic models and
            dataclasses come back as instances and enums as members.

        Raises:
            ToolArgumentsError: The text is not a JSON object or does not fit the signature; the
                message is written for the model.
        """
        return validate_arguments(self._binding, self.name, arguments)

    async def invoke(self, args: dict[str, Any], ctx: ToolContext | None = None) -> Any:
        """Call the function with validated arguments.

        Sync functions run in a worker thread (``run_in_thread``) so they never block the event
        loop, unless the tool is ``inline``. Exceptions propagate unchanged.

        Args:
            args: Validated arguments, as returned by ``validate``.
            ctx: The call's context, passed to the function's ``ToolContext`` parameter if it
                declares one.

        Returns:
            Whatever the function returned.
        """
        binding = self._binding
        kwargs = dict(args)
        if binding.context_param is not None:
            kwargs[binding.context_param] = ctx
        if binding.is_async:
            return await binding.function(**kwargs)
        if self.inline:
            result = binding.function(**kwargs)
        else:
            result = await run_in_thread(partial(binding.function, **kwargs), self._pace)
        # A sync wrapper around an async function hands back an awaitable; finish it here.
        if inspect.isawaitable(result):
            result = await result
        return result

    def schedule(self, args: dict[str, Any]) -> str | None:
        """The concurrency class of one call.

        Args:
            args: The call's validated arguments.

        Returns:
            ``None`` if the call must run alone; otherwise it may overlap other non-exclusive
            calls, except those with the same non-empty key (``""`` means no resource key).

        Raises:
            UsageError: A ``concurrency_key`` function returned something other than a string or
                ``None``.
        """
        key = self.concurrency_key
        if key is None or isinstance(key, str):
            return key
        result = key(args)
        if result is not None and not isinstance(result, str):
            raise UsageError(
                f"concurrency_key of tool {self.name!r} returned {type(result).__name__}; "
                "it must return a string or None"
            )
        return result

    def render(self, value: Any) -> str:
        """The model-visible text of a result.

        Args:
            value: What the tool returned.

        Returns:
            ``str`` values unchanged, pydantic models as their JSON, anything else as JSON.
        """
        return render_result(value)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    replayable: bool = False,
    side_effects: bool = True,
    concurrency_key: ConcurrencyKey = None,
    direct_result: bool = False,
    retain: Retain = "default",
    main_only: bool = False,
    strict: bool = False,
    completion: bool = False,
    policy: Policy | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    inline: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    replayable: bool = False,
    side_effects: bool = True,
    concurrency_key: ConcurrencyKey = None,
    direct_result: bool = False,
    retain: Retain = "default",
    main_only: bool = False,
    strict: bool = False,
    completion: bool = False,
    policy: Policy | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    inline: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function into a tool; use as ``@tool`` or ``@tool(...)``.

    The argument schema comes from the type hints, the description and the parameter
    descriptions from the docstring (Google, NumPy or Sphinx style). A parameter annotated
    ``ToolContext`` receives the call's context and is not part of the schema.

    Args:
        function: The function, when used bare as ``@tool``.
        name: The tool name; defaults to the function's name.
        description: What the tool does; defaults to the docstring text before its sections.
        replayable: Whether a call may simply run again when a resume finds it unfinished.
        side_effects: Whether the tool may change the world outside the run. Left out, it is
            assumed to (safe by default): only ``side_effects=False`` lets a call cut off by a
            crash be called again without review.
        concurrency_key: ``None`` (each call runs alone), a constant key (``""`` for freely
            concurrent), or a function of the validated arguments returning such a key.
        direct_result: Whether the result ends the turn as the answer.
        retain: ``"default"``, ``"keep"`` or ``"intact"``: how results survive history trimming.
        main_only: Whether only the main agent may use the tool.
        strict: Whether providers should enforce the schema exactly, where they can.
        completion: Whether the tool ends the run with a structured value.
        policy: A function of the call (``CallView``) deciding before it runs: ``None`` to run
            it, ``Submit(...)`` to hand it to the host, ``Confirm(...)`` to wait for approval.
        timeout: Seconds a call may run before it is settled as interrupted.
        max_result_chars: Most characters of a result the model sees (default
            ``DEFAULT_MAX_RESULT_CHARS``; ``None``: no bound): a longer one is offloaded (with
            a context policy) or truncated with a note.
        inline: Run a sync function on the event loop instead of a worker thread. Only for
            bodies that never block (microseconds of computation): the thread hand-off then
            costs more than the body. A blocking inline body stalls every run of the process;
            an inline tool cannot have a ``timeout``.

    Returns:
        The ``Tool``, or a decorator producing it when called with arguments only.

    Raises:
        ToolDefinitionError: Listing every problem with the function and the traits at once.
    """
    traits: dict[str, Any] = {
        "replayable": replayable,
        "side_effects": side_effects,
        "concurrency_key": concurrency_key,
        "direct_result": direct_result,
        "retain": retain,
        "main_only": main_only,
        "strict": strict,
        "completion": completion,
        "policy": policy,
        "timeout": timeout,
        "max_result_chars": max_result_chars,
        "inline": inline,
    }

    def decorate(fn: Callable[..., Any]) -> Tool:
        return _make_tool(fn, name=name, description=description, traits=traits)

    if function is None:
        return decorate
    return decorate(function)


def _make_tool(
    function: Any, *, name: str | None, description: str | None, traits: dict[str, Any]
) -> Tool:
    tool_name = name if name is not None else getattr(function, "__name__", None)
    if tool_name is None:
        tool_name = type(function).__name__
    analysis = analyse_function(function)
    final_description = analysis.description if description is None else description
    problems = validate_tool_name(tool_name) + _trait_problems(
        description=final_description,
        concurrency_key=traits["concurrency_key"],
        retain=traits["retain"],
        bools={t: traits[t] for t in _BOOL_TRAITS},
        policy=traits["policy"],
        timeout=traits["timeout"],
        max_result_chars=traits["max_result_chars"],
        inline_async=traits["inline"] is True
        and analysis.binding is not None
        and analysis.binding.is_async,
    )
    problems += analysis.problems
    if problems or analysis.binding is None:
        raise ToolDefinitionError(str(tool_name), problems)
    return Tool(
        name=tool_name,
        description=final_description,
        parameters=analysis.parameters,
        function=function,
        _binding=analysis.binding,
        **traits,
    )


def _trait_problems(
    *,
    description: object,
    concurrency_key: object,
    retain: object,
    bools: dict[str, object],
    policy: object = None,
    timeout: object = None,
    max_result_chars: object = None,
    inline_async: bool = False,
) -> list[str]:
    problems: list[str] = []
    if bools.get("inline") is True and timeout is not None:
        problems.append("an inline tool cannot have a timeout: its body runs on the event loop")
    if inline_async:
        problems.append("inline applies to sync functions only (an async one runs on the loop)")
    if max_result_chars is not None and (
        isinstance(max_result_chars, bool)
        or not isinstance(max_result_chars, int)
        or max_result_chars < 1
    ):
        problems.append(
            f"max_result_chars must be a positive number of characters or None, "
            f"got {max_result_chars!r}"
        )
    if policy is not None and not callable(policy):
        problems.append(f"policy must be a function of the call, got {type(policy).__name__}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        problems.append(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    if not isinstance(description, str):
        problems.append(f"description must be a string, got {type(description).__name__}")
    if retain not in _RETAIN_VALUES:
        allowed = ", ".join(repr(v) for v in _RETAIN_VALUES)
        problems.append(f"retain must be one of {allowed}, got {retain!r}")
    if not (concurrency_key is None or isinstance(concurrency_key, str)) and not callable(
        concurrency_key
    ):
        problems.append(
            "concurrency_key must be None, a string, or a function of the arguments returning "
            f"one, got {type(concurrency_key).__name__}"
        )
    for trait, value in bools.items():
        if not isinstance(value, bool):
            problems.append(f"{trait} must be True or False, got {value!r}")
    return problems
