"""Tool.invoke, Tool.schedule and Tool.render."""

import asyncio
import dataclasses
import datetime
import functools
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel

from steadyrun._errors import ToolDefinitionError, UsageError
from steadyrun.tools import ToolContext, tool


class Reply(BaseModel):
    text: str
    score: float


@dataclass
class Row:
    id: int
    when: datetime.date


class Level(Enum):
    LOW = "low"


def make_ctx() -> ToolContext:
    return ToolContext(
        run_id="r1", call_id="c1", tool_name="t", provider_call_id="p1", deps={"k": 1}
    )


async def test_async_tool() -> None:
    @tool
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    assert await double.invoke(double.validate('{"n": 21}')) == 42


async def test_sync_tool_runs_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        return threading.get_ident()

    assert await where.invoke({}) != loop_thread


async def test_sync_tool_does_not_block_the_loop() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    def blocking() -> str:
        started.set()
        release.wait(5)
        return "done"

    task = asyncio.create_task(blocking.invoke({}))
    # The loop keeps running while the tool blocks its worker thread.
    await asyncio.to_thread(started.wait, 5)
    release.set()
    assert await task == "done"


async def test_context_is_injected_under_any_name() -> None:
    seen: list[ToolContext | None] = []

    @tool
    async def first(ctx_here: ToolContext, n: int) -> int:
        seen.append(ctx_here)
        return n

    @tool
    def second(*, n: int, info: ToolContext) -> int:
        seen.append(info)
        return n

    ctx = make_ctx()
    assert await first.invoke({"n": 1}, ctx) == 1
    assert await second.invoke({"n": 2}, ctx) == 2
    assert await second.invoke({"n": 3}) == 3
    assert seen == [ctx, ctx, None]
    assert seen[0] is not None
    assert seen[0].deps == {"k": 1}


async def test_exceptions_propagate_unchanged() -> None:
    class Boom(Exception):
        pass

    @tool
    def sync_fail() -> None:
        raise Boom("sync")

    @tool
    async def async_fail() -> None:
        raise Boom("async")

    with pytest.raises(Boom, match="sync"):
        await sync_fail.invoke({})
    with pytest.raises(Boom, match="async"):
        await async_fail.invoke({})


async def test_sync_wrapper_of_async_function_is_awaited() -> None:
    async def inner(n: int) -> int:
        return n + 1

    @functools.wraps(inner)
    def wrapper(n: int) -> Any:
        return inner(n)

    t = tool(wrapper)
    assert await t.invoke({"n": 1}) == 2


def test_schedule_default_is_exclusive() -> None:
    @tool
    def f(path: str) -> None:
        pass

    assert f.schedule({"path": "a"}) is None


@pytest.mark.parametrize("key", ["", "db"])
def test_schedule_constant_key(key: str) -> None:
    @tool(concurrency_key=key)
    def f(path: str) -> None:
        pass

    assert f.schedule({"path": "a"}) == key


def test_schedule_callable_key_receives_validated_args() -> None:
    seen: list[dict[str, Any]] = []

    def by_path(args: dict[str, Any]) -> str | None:
        seen.append(args)
        return None if args["level"] is Level.LOW else f"file:{args['path']}"

    @tool(concurrency_key=by_path)
    def f(path: str, level: Level | None = None) -> None:
        pass

    args = f.validate('{"path": "a.txt"}')
    assert f.schedule(args) == "file:a.txt"
    assert f.schedule(f.validate('{"path": "b", "level": "low"}')) is None
    assert seen[0] == {"path": "a.txt", "level": None}


def test_schedule_callable_with_bad_result() -> None:
    @tool(concurrency_key=lambda args: 3)  # type: ignore[arg-type,return-value]
    def f() -> None:
        pass

    with pytest.raises(UsageError, match="returned int"):
        f.schedule({})


def test_render_each_kind() -> None:
    @tool
    def f() -> None:
        pass

    assert f.render("plain text") == "plain text"
    assert f.render("") == ""
    assert f.render(Reply(text="hi", score=0.5)) == '{"text":"hi","score":0.5}'
    assert f.render(Row(id=1, when=datetime.date(2024, 5, 1))) == '{"id": 1, "when": "2024-05-01"}'
    assert f.render({"a": [1, 2], "b": None}) == '{"a": [1, 2], "b": null}'
    assert f.render([1, "x", True]) == '[1, "x", true]'
    assert f.render(3) == "3"
    assert f.render(2.5) == "2.5"
    assert f.render(True) == "true"
    assert f.render(None) == "null"
    assert f.render("héllo") == "héllo"
    assert f.render({"name": "Zoë"}) == '{"name": "Zoë"}'
    assert f.render(Level.LOW) == '"low"'
    assert f.render([Reply(text="a", score=1)]) == '[{"text": "a", "score": 1.0}]'


def test_render_converts_what_has_a_json_form_and_refuses_the_rest() -> None:
    @tool
    def f() -> None:
        pass

    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    assert f.render({(1, 2): "tuple key"}) == '{"1,2": "tuple key"}'
    assert f.render({"s": {3}, "t": (1, 2), "b": b"ab"}) == '{"s": [3], "t": [1, 2], "b": "ab"}'
    # No JSON form: refused, never shown as its str() (which the model could not use).
    with pytest.raises(UsageError, match="type Opaque has no JSON form"):
        f.render(Opaque())
    with pytest.raises(UsageError, match="no JSON form"):
        f.render({"nested": Opaque()})
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(UsageError, match="no JSON form"):
        f.render(cyclic)


def test_tool_is_frozen_and_replace_revalidates() -> None:
    @tool
    def f() -> None:
        pass

    with pytest.raises(dataclasses.FrozenInstanceError):
        f.name = "g"  # type: ignore[misc]
    g = dataclasses.replace(f, name="g", direct_result=True)
    assert (g.name, g.direct_result, g.definition().name) == ("g", True, "g")
    with pytest.raises(ToolDefinitionError):
        dataclasses.replace(f, name="not valid")
    with pytest.raises(ToolDefinitionError):
        dataclasses.replace(f, retain="forever")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="cannot be swapped"):
        dataclasses.replace(f, function=lambda: None)
