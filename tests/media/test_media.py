"""Media by reference: read and checked before each model call, within a budget, by modality."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyrun as sr
from crashkit import crash_when, hang
from steadyrun.chat import MediaPart, MediaRef, TextPart, ToolResultPart
from steadyrun.media import MediaOptions, media_ref, supplying
from steadyrun.media._supply import MediaSupply
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels" * 10
PDF = b"%PDF-1.7\n" + b"pages" * 10


class Shelf:
    """The host's media storage (a dict standing in for a bucket), counting reads."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.reads: list[str] = []

    def put(self, key: str, data: bytes, mime: str) -> MediaRef:
        self.files[key] = data
        return media_ref(key, data, mime)

    async def read(self, ref: MediaRef) -> bytes:
        self.reads.append(ref.key)
        return self.files[ref.key]


def user_message(text_: str, *refs: MediaRef) -> sr.Message:
    return sr.Message(role="user", parts=[TextPart(text=text_), *(MediaPart(ref=r) for r in refs)])


def texts_of(request: sr.ModelRequest) -> list[str]:
    out = []
    for m in request.messages:
        for p in m.parts:
            if isinstance(p, TextPart):
                out.append(p.text)
            elif isinstance(p, ToolResultPart):
                out.append(p.content)
    return out


def media_of(request: sr.ModelRequest) -> list[str]:
    out = []
    for m in request.messages:
        for p in m.parts:
            if isinstance(p, MediaPart):
                out.append(p.ref.key)
            elif isinstance(p, ToolResultPart):
                out += [r.key for r in p.media]
    return out


async def test_the_model_gets_the_bytes_of_an_image_and_a_pdf() -> None:
    shelf = Shelf()
    image = shelf.put("u/1/screenshot.png", PNG, "image/png")
    pdf = shelf.put("u/1/invoice.pdf", PDF, "application/pdf")
    model = ScriptedModel([text("I see both")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read))
    agent = sr.Agent(name="a", model=model)
    result = await runtime.run(agent, run_id="m", input=user_message("look", image, pdf))
    assert result.status == "completed"
    assert model.media[0] == {image.key: PNG, pdf.key: PDF}
    # The records hold references only.
    stored = await runtime.store.load("m")
    assert stored is not None
    assert [p for p in stored.context[0].parts if isinstance(p, MediaPart)][0].ref == image


async def test_media_changed_after_it_was_attached_is_replaced_by_a_note() -> None:
    shelf = Shelf()
    image = shelf.put("k.png", PNG, "image/png")
    shelf.files["k.png"] = PNG + b"tampered"
    model = ScriptedModel([text("ok")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read))
    await runtime.run(sr.Agent(name="a", model=model), run_id="m", input=user_message("x", image))
    assert model.media[0] == {}
    assert media_of(model.requests[0]) == []
    assert "[image k.png is not shown: it changed after it was attached]" in texts_of(
        model.requests[0]
    )


async def test_a_reader_that_fails_gives_a_note_not_a_failed_run() -> None:
    async def broken(ref: MediaRef) -> bytes:
        raise OSError("bucket down")

    model = ScriptedModel([text("ok")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=broken))
    ref = media_ref("k.png", PNG, "image/png")
    result = await runtime.run(
        sr.Agent(name="a", model=model), run_id="m", input=user_message("x", ref)
    )
    assert result.status == "completed"
    assert "[image k.png is not shown: it could not be read]" in texts_of(model.requests[0])


async def test_the_budget_keeps_the_newest_media_and_cuts_at_the_first_that_does_not_fit() -> None:
    shelf = Shelf()
    refs = [shelf.put(f"{i}.png", PNG + bytes([i]), "image/png") for i in range(4)]
    model = ScriptedModel([text("ok")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read, max_items=2))
    await runtime.run(sr.Agent(name="a", model=model), run_id="m", input=user_message("x", *refs))
    assert media_of(model.requests[0]) == ["2.png", "3.png"]
    notes = [t for t in texts_of(model.requests[0]) if "budget" in t]
    assert [n.split()[1] for n in notes] == ["0.png", "1.png"]
    assert shelf.reads == ["2.png", "3.png"]  # media over the budget are never read

    by_bytes = ScriptedModel([text("ok")])
    size = refs[0].size
    options = MediaOptions(reader=shelf.read, max_bytes=size * 2 + size // 2)
    runtime = sr.Runtime(sr.MemoryStore(), media=options)
    await runtime.run(
        sr.Agent(name="a", model=by_bytes), run_id="m", input=user_message("x", *refs)
    )
    assert media_of(by_bytes.requests[0]) == ["2.png", "3.png"]


async def test_a_model_without_image_input_gets_the_adapters_text() -> None:
    shelf = Shelf()
    image = shelf.put("scan.png", PNG, "image/png")
    pdf = shelf.put("doc.pdf", PDF, "application/pdf")
    ocr_calls: list[str] = []

    def ocr(ref: MediaRef, data: bytes) -> str:
        ocr_calls.append(ref.key)
        assert data == PNG
        return "TOTAL: 42 EUR"

    model = ScriptedModel([text("one"), text("two")], input_modalities={"pdf"})
    options = MediaOptions(reader=shelf.read, adapters={"image": ocr})
    runtime = sr.Runtime(sr.MemoryStore(), media=options)
    agent = sr.Agent(name="a", model=model)
    await runtime.run(agent, run_id="m", input=user_message("x", image, pdf))
    await runtime.run(agent, run_id="m", input="again")
    assert "[image scan.png as text]\nTOTAL: 42 EUR" in texts_of(model.requests[0])
    assert media_of(model.requests[0]) == ["doc.pdf"]
    assert ocr_calls == ["scan.png"]  # the text is kept for the run's later calls

    text_only = ScriptedModel([text("ok")], input_modalities=())
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read))
    await runtime.run(sr.Agent(name="a", model=text_only), run_id="m", input=user_message("x", pdf))
    assert "[pdf doc.pdf (application/pdf) is not shown: this model cannot read pdf]" in texts_of(
        text_only.requests[0]
    )


def chart_tool(shelf: Shelf) -> sr.Tool:
    @sr.tool
    async def draw_chart(metric: str, ctx: sr.ToolContext) -> str:
        """Draw a chart.

        Args:
            metric: What to chart.
            ctx: The call's context.
        """
        ctx.attach(shelf.put(f"charts/{metric}.png", PNG, "image/png"))
        return f"chart of {metric} attached"

    return draw_chart


async def test_a_tool_attaches_media_to_its_result() -> None:
    shelf = Shelf()
    model = ScriptedModel([tool_calls(("draw_chart", {"metric": "sales"})), text("ok")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read))
    agent = sr.Agent(name="a", model=model, tools=[chart_tool(shelf)])
    result = await runtime.run(agent, run_id="m", input="chart sales")
    record = result.call("m1.c1")
    assert [r.key for r in record.media] == ["charts/sales.png"]
    assert model.media[1] == {"charts/sales.png": PNG}
    result_part = model.requests[1].messages[-1].parts[0]
    assert isinstance(result_part, ToolResultPart) and result_part.media == record.media


async def test_tool_media_follow_the_results_for_models_that_take_media_only_from_users() -> None:
    shelf = Shelf()
    model = ScriptedModel(
        [tool_calls(("draw_chart", {"metric": "sales"})), text("ok")],
        media_in_tool_results=False,
    )
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read))
    agent = sr.Agent(name="a", model=model, tools=[chart_tool(shelf)])
    await runtime.run(agent, run_id="m", input="chart sales")
    tool_msg, follow = model.requests[1].messages[-2:]
    assert tool_msg.role == "tool" and tool_msg.parts[0].media == []  # type: ignore[union-attr]
    assert follow.role == "user"
    assert follow.parts[0] == TextPart(text="Media returned by draw_chart (call_1):")
    assert isinstance(follow.parts[1], MediaPart) and model.media[1]["charts/sales.png"] == PNG
    # Only the request changed: the stored context keeps the media on the tool result.
    stored = await runtime.store.load("m")
    assert stored is not None and stored.context[2].parts[0].media  # type: ignore[union-attr]


async def test_a_url_is_tried_first_and_then_nothing_is_read() -> None:
    shelf = Shelf()
    image = shelf.put("a.png", PNG, "image/png")

    async def url(ref: MediaRef) -> str | None:
        return f"https://cdn.example/{ref.key}"

    model = ScriptedModel([text("ok")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read, url=url))
    await runtime.run(sr.Agent(name="a", model=model), run_id="m", input=user_message("x", image))
    assert model.media[0] == {"a.png": "https://cdn.example/a.png"}
    assert shelf.reads == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_resume_after_a_crash_hands_the_model_the_same_media(
    kind: str, tmp_path: Path
) -> None:
    shelf = Shelf()
    image = shelf.put("receipt.png", PNG, "image/png")
    store = sr.MemoryStore() if kind == "memory" else sr.SqliteStore(tmp_path / "runs.db")
    crash = asyncio.Event()

    @sr.tool
    async def stall() -> str:
        """Hangs until the process dies."""
        crash.set()
        await hang()
        return ""

    first = ScriptedModel([tool_calls(("draw_chart", {"metric": "x"}), ("stall", {}))])
    agent = sr.Agent(name="a", model=first, tools=[chart_tool(shelf), stall])
    options = MediaOptions(reader=shelf.read)
    runtime = sr.Runtime(store, media=options)
    await crash_when(runtime.run(agent, run_id="m", input=user_message("x", image)), crash)

    second = ScriptedModel([text("done")])
    resumed = sr.Runtime(store, agents=[replace(agent, model=second)], media=options)
    result = await resumed.resume("m")
    assert result.status == "completed"
    assert second.media[0] == {"receipt.png": PNG, "charts/x.png": PNG}
    assert first.media[0] == {"receipt.png": PNG}
    await store.close()


def test_options_are_checked() -> None:
    with pytest.raises(sr.UsageError, match="unknown kinds"):
        MediaOptions(adapters={"smell": lambda r, d: ""})
    with pytest.raises(sr.UsageError):
        MediaOptions(max_items=-1)


def test_attach_takes_only_references() -> None:
    ctx = sr.ToolContext(run_id="r", call_id="c", tool_name="t", provider_call_id="p")
    with pytest.raises(TypeError):
        ctx.attach(b"bytes")  # type: ignore[arg-type]


async def test_provider_adapters_take_the_runtimes_bytes() -> None:
    from steadyrun.models._anthropic_convert import MediaAccess, _media_block
    from steadyrun.models._openai_common import MediaResolver

    ref = media_ref("a.png", PNG, "image/png")
    supply = MediaSupply()
    supply.add_bytes(ref, PNG)
    with supplying(supply):
        resolved = await MediaResolver(None, None, "openai").resolve(ref, remote_kinds=("image",))
        block = await _media_block(ref, MediaAccess())
    assert resolved.url.startswith("data:image/png;base64,")
    assert block["source"]["type"] == "base64"
    with pytest.raises(sr.UsageError):  # outside a call the adapter needs its own reader
        await MediaResolver(None, None, "openai").resolve(ref, remote_kinds=("image",))


async def test_media_sent_later_in_a_long_run_still_reach_the_model() -> None:
    # The runtime skips rescanning messages it found free of media: a later image is not
    # missed, and neither is media in a context a rewrite replaced.
    shelf = Shelf()
    image = shelf.put("late.png", PNG, "image/png")
    model = ScriptedModel([text("one"), text("two"), text("three")])
    runtime = sr.Runtime(sr.MemoryStore(), media=MediaOptions(reader=shelf.read))
    agent = sr.Agent(name="a", model=model)
    await runtime.run(agent, run_id="m", input="hello")
    await runtime.run(agent, run_id="m", input="again")
    await runtime.run(agent, run_id="m", input=user_message("now look", image))
    assert model.media == [{}, {}, {"late.png": PNG}]


def test_the_media_watch_rescans_after_a_rewrite() -> None:
    from steadyrun.media import MediaWatch

    watch = MediaWatch()
    plain = [sr.Message(role="user", parts=[TextPart(text="x")])]
    request = sr.ModelRequest(messages=plain)
    assert not watch.needs(plain, 0, request)
    with_media = [user_message("y", media_ref("k", PNG, "image/png"))]
    assert watch.needs(with_media, 1, sr.ModelRequest(messages=with_media))


_REF = MediaRef(key="k", mime="image/png", size=1)
_parts = st.lists(
    st.sampled_from(
        [
            TextPart(text="t"),
            ToolResultPart(call_id="c", name="n", content="r"),
            ToolResultPart(call_id="c", name="n", content="r", media=[_REF]),
            MediaPart(ref=_REF),
        ]
    ),
    max_size=3,
)


@given(st.lists(_parts, max_size=6), st.integers(min_value=0, max_value=7))
def test_the_media_scan_finds_what_has_media_finds(parts: list[Any], start: int) -> None:
    from steadyrun.chat import Message
    from steadyrun.media._prepare import _any_media, has_media

    messages = [Message(role="tool", parts=p) for p in parts]
    assert _any_media(messages, start) == any(has_media(m) for m in messages[start:])


class _CountingMessages(list):  # type: ignore[type-arg]
    """A request's messages that count how often they are walked."""

    walks = 0

    def __iter__(self) -> Any:
        type(self).walks += 1
        return super().__iter__()


@pytest.mark.parametrize("model_kind", ["scripted", "function"])
async def test_the_model_doubles_do_not_rescan_the_history_without_media(model_kind: str) -> None:
    # Issue 20: the doubles noted the media supplied to each request by walking the whole
    # history on every model call (O(N) per call, O(N^2) per run). With nothing supplied to
    # the call there is nothing to note: the history is not walked at all.
    messages = _CountingMessages([user_message(f"m{i}") for i in range(50)])
    request = sr.ModelRequest(messages=messages)
    model: Any = (
        ScriptedModel([text("ok")] * 3)
        if model_kind == "scripted"
        else FunctionModel(lambda r: text("ok"))
    )
    _CountingMessages.walks = 0
    await model.respond(request)
    assert _CountingMessages.walks == 0
    assert model.media == [{}]
    with supplying(MediaSupply()):  # a supply without media: still nothing to note
        await model.respond(request)
    assert _CountingMessages.walks == 0
    shelf = Shelf()
    image = shelf.put("k.png", PNG, "image/png")
    supply = MediaSupply()
    supply.add_bytes(image, PNG)
    with supplying(supply):  # something supplied: the media are noted as before
        await model.respond(sr.ModelRequest(messages=[user_message("x", image)]))
    assert model.media[-1] == {"k.png": PNG}
