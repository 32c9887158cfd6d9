"""With ``Texts.chinese()`` extensions, media notes and context management speak no English.

The second half of ``test_texts_wired.py`` (same check, ``textskit``): everything the models
received in runs with extensions, media and context management.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import steadyrun as sr
from steadyrun._texts import Texts
from steadyrun.chat import MediaPart, Message, ModelRequest, TextPart, ToolCallPart, ToolResultPart
from steadyrun.context import (
    CALLS_META,
    CLEARED_META,
    OFFLOADED_META,
    ContextManager,
    ContextPolicy,
    clear_rounds,
    is_cleared,
    mark,
    offload_text,
    transcript,
    verbatim_refs,
)
from steadyrun.context._rounds import clearable_bytes
from steadyrun.extensions import DeferredTools, Delegate, Memory, Planning, Skills, SubAgents
from steadyrun.extensions.memory import InMemoryMemoryBank
from steadyrun.media import MediaOptions, media_ref
from steadyrun.testing import FunctionModel, ScriptedModel, text, tool_calls
from textskit import EN, ZH, assert_no_english, received, results

# -- extensions ----------------------------------------------------------------------------


async def test_planning_speaks_chinese() -> None:
    model = ScriptedModel(
        [
            tool_calls(("create_task", {"title": "写报告"}), ("create_task", {"title": " "})),
            tool_calls(("create_task", {"title": "再写一份"}), ("update_task", {"task_id": "t9"})),
            tool_calls(
                ("update_task", {"task_id": "t1", "status": "in_progress", "notes": "进行中"})
            ),
            tool_calls(("get_task", {"task_id": "t1"}), ("list_tasks", {})),
            text("完成"),
        ]
    )
    agent = sr.Agent(name="a", model=model, extensions=[Planning(max_tasks=1)])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="计划")
    assert model.requests[0].instructions.endswith(ZH.planning_instructions)
    assert results(model.requests[1])[0] == ZH.plan_created.format(task_id="t1", title="写报告")
    assert ZH.plan_needs_title in results(model.requests[1])[1]
    assert ZH.plan_full.format(max_tasks="1") in results(model.requests[2])[0]
    assert ZH.plan_unknown_task.format(task_id="t9", known="t1") in results(model.requests[2])[1]
    assert "当前计划" in model.requests[4].instructions
    assert ZH.plan_task_notes.format(notes="进行中") in results(model.requests[4])[0]
    empty = ScriptedModel(
        [tool_calls(("list_tasks", {}), ("get_task", {"task_id": "t1"})), text("")]
    )
    agent = sr.Agent(name="a", model=empty, extensions=[Planning()])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="计划")
    listed, unknown = results(empty.requests[1])
    assert listed == ZH.plan_empty and "（现有任务：无）" in unknown
    assert_no_english(received([*model.requests, *empty.requests]))


@sr.tool
def weather(city: str) -> str:
    """Get the weather of a city.

    Args:
        city: The city.
    """
    return f"{city}：晴"


async def test_deferred_tools_speak_chinese() -> None:
    model = ScriptedModel(
        [
            tool_calls(("weather", {"city": "北京"})),
            tool_calls(("search_tools", {"query": "zzz"})),
            tool_calls(("search_tools", {"query": "weather"})),
            text("好"),
        ]
    )
    agent = sr.Agent(name="a", model=model, extensions=[DeferredTools([weather])])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="天气")
    not_yet = ZH.tool_not_found_yet.format(name="weather", search_tool="search_tools")
    assert not_yet in results(model.requests[1])[0]
    assert results(model.requests[2])[-1] == ZH.search_no_match
    assert results(model.requests[3])[-1].startswith("以下工具现在可以使用：\n- weather")
    assert_no_english(received(model.requests))


async def test_sub_agents_speak_chinese() -> None:
    @sr.tool
    async def noop() -> str:
        """Does nothing."""
        return ""

    sub = ScriptedModel([text("42"), tool_calls(("submit_result", {"result": 42}))])
    calc = Delegate(name="calc", description="计算一个数。", model=sub, output=int)
    main = ScriptedModel(
        [
            tool_calls(("delegate", {"task": "做点事"})),
            tool_calls(("noop", {})),  # the general sub-agent: one model call, then its limit
            tool_calls(("delegate_calc", {"task": "算一下"})),
            text("好"),
        ]
    )
    ext = SubAgents([calc], limits=sr.Limits(max_iterations=1))
    agent = sr.Agent(name="a", model=main, tools=[noop], extensions=[ext])
    result = await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="委派")
    assert result.status == "completed"
    assert main.requests[1].instructions == ZH.subagent_instructions
    failed = results(main.requests[2])[0]
    assert ZH.subagent_failed.format(why="它用完了模型调用次数的上限（max_iterations=1）") in failed
    assert results(main.requests[3])[0] == "42"
    assert sub.requests[0].instructions.endswith(ZH.subagent_output_instructions)
    assert sub.requests[1].messages[-1].text == ZH.subagent_use_output_tool
    delegate = next(t for t in main.requests[0].tools if t.name == "delegate")
    assert delegate.description == ZH.delegate_description
    assert delegate.parameters["properties"]["task"]["description"] == ZH.delegate_task_arg
    submit = next(t for t in sub.requests[0].tools if t.name == "submit_result")
    assert submit.description.startswith(ZH.submit_result_description)
    assert_no_english(
        received(main.requests, tool_docs=["delegate", "delegate_calc"])
        + received(sub.requests, tool_docs=["submit_result"])
    )


async def test_skills_speak_chinese(tmp_path: Path) -> None:
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: report\ndescription: 写报告。\n---\n按模板写报告。\n", encoding="utf-8"
    )
    (folder / "template.md").write_text("# 模板\n", encoding="utf-8")
    model = ScriptedModel(
        [
            tool_calls(("list_skills", {}), ("load_skill", {"name": "nope"})),
            tool_calls(("load_skill", {"name": "report"})),
            tool_calls(("read_skill_resource", {"skill": "report", "path": "../x"})),
            text("好"),
        ]
    )
    agent = sr.Agent(name="a", model=model, extensions=[Skills(tmp_path)])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="写")
    assert ZH.skills_instructions in model.requests[0].instructions
    listed, unknown = results(model.requests[1])
    assert listed == "- report: 写报告。"
    assert ZH.skill_unknown.format(name="nope", known="report") in unknown
    loaded = results(model.requests[2])[0]
    assert loaded.startswith("技能 'report' 已加载。") and "此技能的资源文件" in loaded
    assert ZH.skill_resource_up.format(path="../x") in results(model.requests[3])[0]
    assert_no_english(received(model.requests))


async def test_memory_speaks_chinese() -> None:
    model = ScriptedModel(
        [
            tool_calls(("remember", {"text": "用户的狗叫 Rex"})),
            tool_calls(("remember", {"text": "用户的狗叫 Rex"}), ("forget", {"memory_id": "x"})),
            text("好"),
        ]
    )
    memory = Memory(InMemoryMemoryBank(), tools=True, extract=False)
    agent = sr.Agent(name="a", model=model, extensions=[memory])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="记住")
    assert ZH.memory_tools_instructions in model.requests[0].instructions
    (remembered,) = results(model.requests[1])
    assert remembered.startswith("已记下")
    again, unknown = results(model.requests[2])
    assert again.startswith("已经记过了") and unknown == ZH.memory_unknown.format(memory_id="x")
    later = ScriptedModel([text("好")])
    agent = sr.Agent(name="a", model=later, extensions=[memory])
    await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r2", input="Rex 好吗")
    assert "相关记忆" in later.requests[0].instructions
    assert_no_english(received([*model.requests, *later.requests]))


async def test_memory_extraction_asks_in_chinese() -> None:
    extractor = FunctionModel(lambda request: tool_calls(("final_result", {"changes": []})))
    memory = Memory(InMemoryMemoryBank(), extract_model=extractor).for_run()
    memory.texts = ZH
    await memory.extract([Message.user("我的狗叫 Rex")], namespace="u")
    (request,) = extractor.requests
    assert request.instructions == ZH.memory_extract_instructions
    assert request.messages[0].text.startswith("已有的记忆：\n（无）")
    assert_no_english(received(extractor.requests))


# -- media ---------------------------------------------------------------------------------


async def test_media_notes_are_chinese() -> None:
    files = {"doc.pdf": b"%PDF-1.4", "a.png": b"\x89PNG", "b.png": b"\x89PNG2"}

    async def read(ref: sr.MediaRef) -> bytes:
        return b"changed" if ref.key == "b.png" else files[ref.key]

    refs = [
        media_ref(k, v, "application/pdf" if k.endswith("pdf") else "image/png")
        for k, v in files.items()
    ]
    model = ScriptedModel([text("好")], input_modalities={"image"})
    options = MediaOptions(reader=read, adapters={})
    runtime = sr.Runtime(sr.MemoryStore(), texts=ZH, media=options)
    message = Message(role="user", parts=[TextPart(text="看"), *(MediaPart(ref=r) for r in refs)])
    await runtime.run(sr.Agent(name="a", model=model), run_id="m", input=message)
    seen = received(model.requests)
    assert ZH.media_unavailable.format(kind="pdf", key="doc.pdf", mime="application/pdf") in seen
    assert ZH.media_changed.format(kind="image", key="b.png") in seen
    assert_no_english(seen)


# -- context management --------------------------------------------------------------------


def tool_round(i: int, content: str, ref: str | None = None) -> list[Message]:
    call = ToolCallPart(call_id=f"call_{i}", name="fetch", arguments="{}")
    result = ToolResultPart(call_id=f"call_{i}", name="fetch", content=content)
    meta = {CALLS_META: ref or f"m{i}.c1"}
    return [
        Message(role="assistant", parts=[call]),
        Message(role="tool", parts=[result], meta=meta),
    ]


def context(rounds: int, size: int = 400) -> list[Message]:
    out = [Message.user("开始")]
    for i in range(1, rounds + 1):
        out += tool_round(i, "数" * size)
    return out


def test_cleared_results_are_marked_not_recognized_by_their_text() -> None:
    ctx = context(3)
    cleared = clear_rounds(ctx, 1, lambda name: False, ZH)
    assert cleared is not None
    note = cleared[2].parts[0].content  # type: ignore[union-attr]
    assert note == ZH.cleared_note.format(size="400", ref="m1.c1")
    assert cleared[2].meta == {CALLS_META: "m1.c1", CLEARED_META: '["call_1"]'}
    assert is_cleared(cleared[2], 0) and not is_cleared(cleared[6], 0)
    # Nothing is cleared twice, in any language: a run resumed with other texts included.
    for texts in (ZH, EN, Texts.chinese(cleared_note="[清] {size} {ref}")):
        assert clear_rounds(cleared, 1, lambda name: False, texts) is None
        last = clear_rounds(cleared, 0, lambda name: False, texts)
        assert last is not None and last[:6] == cleared[:6] and is_cleared(last[6], 0)
    assert clearable_bytes(cleared, 1, lambda name: False) == 0
    assert verbatim_refs(cleared) == {"m3.c1"}


def test_contexts_cleared_in_english_before_the_mark_are_still_recognized() -> None:
    ctx = context(2)
    legacy = ToolResultPart(
        call_id="call_1",
        name="fetch",
        content="[Result cleared to save context (400 chars); read it again with "
        'read_offloaded_result(ref="m1.c1").]',
    )
    ctx[2] = Message(role="tool", parts=[legacy], meta={CALLS_META: "m1.c1"})
    assert is_cleared(ctx[2], 0)
    assert clear_rounds(ctx, 1, lambda name: False, ZH) is None
    assert clearable_bytes(ctx, 0, lambda name: False) == 400
    assert verbatim_refs(ctx) == {"m2.c1"}


def test_offloaded_results_are_known_by_their_mark_in_any_words() -> None:
    texts = Texts.chinese(offload_note="[太长：{name} {size} {shown} {ref}]")
    content = offload_text("数" * 50, "m1.c1", 10, "fetch", texts)
    assert content == "数" * 10 + "\n[太长：fetch 50 10 m1.c1]"
    ctx = context(1)
    ctx[2] = Message(
        role="tool",
        parts=[ToolResultPart(call_id="call_1", name="fetch", content=content)],
        meta={CALLS_META: "m1.c1"},
    )
    assert verbatim_refs(ctx) == {"m1.c1"}  # unmarked, and the note names no read tool
    assert verbatim_refs([*ctx[:2], mark(ctx[2], OFFLOADED_META, ["call_1"])]) == set()
    assert "read_offloaded_result(" in offload_text("数" * 50, "m1.c1", 10, "fetch", ZH)


def test_transcripts_for_the_summary_are_chinese() -> None:
    ctx = context(1, 5)
    ctx[2] = Message(
        role="tool",
        parts=[ToolResultPart(call_id="call_1", name="fetch", content="坏", is_error=True)],
    )
    marker = Message(role="user", parts=[TextPart(text="旧摘要")], meta={"steadyrun.summary": "1"})
    out = transcript([marker, *ctx], ZH)
    assert (
        out
        == "[更早的摘要]\n旧摘要\nuser: 开始\nassistant 调用了 fetch({})\nfetch 的结果（出错）：坏"
    )


async def test_the_context_manager_clears_and_summarizes_in_chinese() -> None:
    summarizer = FunctionModel(lambda request: text("摘要：取了三次数。"))
    policy = ContextPolicy(
        window=2_000, clear_share=0.3, summary_share=0.5, keep_rounds=1, summary_tokens=200
    )

    async def emit(event: Any) -> None:
        pass

    manager = ContextManager(
        policy, model=summarizer, pinned=lambda name: False, emit=emit, texts=ZH
    )
    ctx = context(5)
    ctx += tool_round(6, "长" * 5_000)
    rewritten, _ = await manager.fit(ctx, lambda m: ModelRequest(messages=m))
    assert rewritten is not None
    (request,) = summarizer.requests
    assert request.instructions == ZH.summary_instruction
    assert request.messages[0].text.startswith("请总结以下对话：\n\n")
    assert rewritten[0].text == ZH.summary_marker.format(summary="摘要：取了三次数。")
    assert_no_english(received([request, ModelRequest(messages=rewritten)]))
    english = ContextManager(policy, model=summarizer, pinned=lambda name: False, emit=emit)
    assert english.texts == EN  # the policy's instruction, when given, wins over the texts
    assert ContextPolicy(window=5_000).summary_instruction is None
    assert EN.summary_instruction == sr.context.DEFAULT_SUMMARY_INSTRUCTION


async def test_a_run_with_context_management_speaks_chinese() -> None:
    @sr.tool
    def fetch(i: int) -> str:
        """Fetch a page.

        Args:
            i: The page.
        """
        return ("第" + str(i) + "页" + "数" * 500) if i else "长" * 3_000

    steps: list[int] = []

    def respond(request: ModelRequest) -> Any:
        if request.instructions == ZH.summary_instruction:
            return text("摘要")
        calls = len(steps)
        steps.append(calls)
        # Enough pages under the offload size for a summary: a read-back is not pinned.
        if calls < 12:
            return tool_calls(("fetch", {"i": calls}))
        if calls == 12:
            return tool_calls(("read_offloaded_result", {"ref": "m1.c1", "offset": 100}))
        return text("好")

    model = FunctionModel(respond)
    policy = ContextPolicy(
        window=4_000,
        offload_min_bytes=0,
        preview_chars=100,
        clear_share=0.3,
        summary_share=0.6,
        keep_rounds=1,
        summary_tokens=500,
    )
    agent = sr.Agent(name="a", model=model, tools=[fetch], context=policy)
    result = await sr.Runtime(sr.MemoryStore(), texts=ZH).run(agent, run_id="r", input="读")
    assert result.status == "completed"
    seen = received(model.requests)
    assert any("的结果共" in t for t in seen)  # offloaded
    assert any(ZH.summary_instruction == t for t in seen)
    assert_no_english(seen)
