"""Instructions and middleware of extensions that do I/O: the same result on both engines.

On Temporal they run in activities (``steadyrun.temporal._extmw``): the workflow stays
deterministic (its history replays without running them) and no hook ran inside it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import json  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import extmw_kit as kit  # noqa: E402

import steadyrun as sr  # noqa: E402
from steadyrun.chat import ModelRequest  # noqa: E402
from steadyrun.extensions import Extension  # noqa: E402

DATA = Path(__file__).parent / "data"


async def _scenario(engine: Any, folder: Path, **kw: Any) -> tuple[Any, ...]:
    """Two runs asking the same question: the second is answered from the cache."""
    kit.prepare(folder)
    requests: list[ModelRequest] = []
    agent = kit.make_agent(folder, requests)
    first, second = kit.fresh("audit"), kit.fresh("again")
    async with engine(agent, folder, **kw) as run:
        one = await run(first, "Is there tea?")
        two = await run(second, "Is there tea?")
    # Run ids differ between engines: the log is compared with them named by role.
    rows = [(h, d.replace(first, "R1").replace(second, "R2"), i) for h, d, i in kit.log(folder)]
    return one, two, len(requests), rows


async def test_instructions_and_middleware_do_io_with_the_same_result(
    engine: Any, tmp_path: Path
) -> None:
    one, two, model_calls, rows = await _scenario(engine, tmp_path)
    assert one.status == two.status == "completed"
    # Instructions: the agent's, the deterministic extension's, then the file's, with the
    # state the model middleware kept (one call passed on before the second).
    assert one.text == (
        "You are careful.\n\nBe brief.\n\nNotes from the file. (1 calls so far) || "
        "found tea [audited] the policy refuses rm"
    )
    assert two.text == f"cached: {one.text}"  # the model middleware answered from its cache
    assert model_calls == 2
    assert one.calls == [
        ("lookup", "succeeded", "found tea [audited]", None),  # the wrap's result
        ("rm", "failed", None, "the policy refuses rm"),  # refused by the review
    ]
    assert two.calls == []
    assert [r[:2] for r in rows] == [
        ("instructions", "R1 t1.i1"),
        ("wrap_model", "R1 m1"),
        ("review_batch", "R1 m1"),
        ("wrap_tool", "m1.c1 lookup {'q': 'tea'}"),
        ("wrap_tool", "m1.c1 returned"),
        ("instructions", "R1 t1.i2"),
        ("wrap_model", "R1 m2"),
        ("instructions", "R2 t1.i1"),
        ("wrap_model", "R2 m1"),
    ]
    assert all(inside == 0 for *_, inside in rows)  # on Temporal: never in the workflow


@pytest.mark.parametrize(
    ("name", "hooks"),
    [
        (
            "extmw_before.json",
            ["instructions", "wrap_model", "review_batch", "wrap_tool", "wrap_tool"]
            + ["instructions", "wrap_model"],
        ),
        (  # a run crashed mid-body, resumed: recover_call, then the next model call
            "extmw_recover_before.json",
            ["recover_call", "instructions", "wrap_model"],
        ),
    ],
)
async def test_a_history_whose_hooks_ran_in_the_workflow_replays(
    name: str, hooks: list[str], tmp_path: Path
) -> None:
    """Recorded with main 7783891 (``extmw_kit.record``): the instructions, middleware and
    recovery of the I/O extension ran in the workflow. Without the patch markers, they
    still do, on replay, as they ran."""
    from temporalio.client import WorkflowHistory

    from steadyrun.temporal import TemporalApp

    kit.prepare(tmp_path)
    app = TemporalApp(agents=[kit.make_agent(tmp_path, [])], store=sr.MemoryStore())
    for run_id, text in json.loads((DATA / name).read_text()).items():
        await app.replayer().replay_workflow(WorkflowHistory.from_json(run_id, text))
    assert [r[0] for r in kit.log(tmp_path)] == hooks


async def test_recover_call_does_io_with_the_same_result(engine: Any, tmp_path: Path) -> None:
    # A crash mid-body (the built-in run dropped, the Temporal workflow terminated): on
    # resume the I/O extension settles the call from its notes file.
    kit.prepare(tmp_path)
    agent = kit.make_agent(tmp_path, [])
    run_id = kit.fresh("hang")
    async with engine(agent, tmp_path) as run:
        await run.crash(run_id, "Hang on.")
        out = await run.resume(run_id)
    assert out.status == "completed"
    assert out.calls == [
        ("hang", "succeeded", "recovered by the audit (Notes from the file.)", None)
    ]
    assert out.text is not None and out.text.endswith(
        "|| recovered by the audit (Notes from the file.)"
    )
    rows = [(h, d.replace(run_id, "R"), i) for h, d, i in kit.log(tmp_path)]
    assert ("recover_call", "m1.c1 hang running", 0) in rows
    assert all(inside == 0 for *_, inside in rows)


async def test_a_deterministic_extensions_tool_runs_inside_the_io_wrap(
    engine: Any, tmp_path: Path
) -> None:
    # Planning's tool works on the run's plan; wrapped by an I/O wrap_tool it runs in the
    # tool activity on Temporal, with Planning's state going there and back.
    from steadyrun.extensions import Planning

    kit.prepare(tmp_path)
    agent = kit.make_agent(tmp_path, [], first=[Planning()])
    run_id = kit.fresh("plan")
    async with engine(agent, tmp_path) as run:
        out = await run(run_id, "Plan tea.")
    assert out.status == "completed"
    assert [c[:2] for c in out.calls] == [("create_task", "succeeded")]
    assert (out.calls[0][2] or "").endswith(" [audited]")
    assert out.text is not None and "brew tea" in out.text.split(" || ")[0]  # the plan, shown
    rows = [(h, d.replace(run_id, "R"), i) for h, d, i in kit.log(tmp_path)]
    assert ("wrap_tool", "m1.c1 returned", 0) in rows
    assert all(inside == 0 for *_, inside in rows)


class _Tagging(Extension):
    name = "tagging"
    temporal_io = False

    async def wrap_model(self, call: Any, next: Any) -> Any:
        return await next(call)


def test_a_deterministic_wrap_inside_one_that_does_io_is_refused(tmp_path: Path) -> None:
    # The I/O extension's wrap_model runs in the model activity, so it can only be the inner
    # part of the chain: a deterministic one after it would change the order.
    from steadyrun.temporal import TemporalApp

    agent = kit.make_agent(tmp_path, [])
    agent = sr.Agent(name="bad", model=agent.client, extensions=[kit.Audited(tmp_path), _Tagging()])
    with pytest.raises(sr.UsageError, match=r"wrap_model of extension 'tagging'.*'audited'"):
        TemporalApp(agents=[agent])
    TemporalApp(agents=[sr.Agent(name="good", model=agent.client, extensions=[_Tagging()])])


def test_an_io_wrap_around_a_tool_of_the_workflow_is_refused(tmp_path: Path) -> None:
    from steadyrun.extensions import SubAgents
    from steadyrun.temporal import TemporalApp

    agent = sr.Agent(
        name="lead",
        model=kit.make_agent(tmp_path, []).client,
        extensions=[SubAgents(), kit.Audited(tmp_path)],
    )
    with pytest.raises(sr.UsageError, match=r"wrap_tool of 'audited'.*\['delegate'\]"):
        TemporalApp(agents=[agent])


class _Writes(Extension):
    def __init__(self, name: str, text: str | None) -> None:
        self.name = name
        self.text = text

    def instructions(self, view: Any) -> str | None:
        return self.text


@pytest.mark.parametrize(
    ("texts", "want"),
    [
        ((None, "det", "io"), "base\n\ndet\n\nio"),
        (("io", "det", None), "base\n\nio\n\ndet"),
        (("io", None, "det"), "base\n\nio\n\ndet"),
        ((None, None, "det"), "base\n\ndet"),
        ((None, None, None), "base"),
    ],
)
def test_instructions_written_in_the_activity_keep_their_place(
    texts: tuple[str | None, ...], want: str
) -> None:
    # Three extensions after the agent's text: the first and last do I/O (a marker in the
    # workflow), the middle one is deterministic. One that writes nothing leaves no gap, as
    # ExtensionSet.instructions leaves it out on the built-in engine.
    from steadyrun.runtime._extset import ExtensionSet
    from steadyrun.temporal._extmw import fill_instructions, marker

    first, det, last = (_Writes(n, t) for n, t in zip(("a", "d", "z"), texts, strict=True))
    view = kit.TurnView(run_id="r", agent="x", subagent=False, turn=1, iteration=1)
    assert ExtensionSet([first, det, last]).instructions("base", view) == want
    first.instructions = lambda v: marker("a")  # type: ignore[method-assign]
    last.instructions = lambda v: marker("z")  # type: ignore[method-assign]
    in_workflow = ExtensionSet([first, det, last]).instructions("base", view)
    io = {"a": _Writes("a", texts[0]), "z": _Writes("z", texts[2])}
    assert fill_instructions(in_workflow, io, view) == want  # type: ignore[arg-type]
