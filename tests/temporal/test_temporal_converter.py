"""The worker's payload converter writes the same bytes as Temporal's, without ``asdict``.

Histories recorded with Temporal's default converter must replay, and a client with the
default converter reads what a worker writes: so every payload must be byte for byte the
one Temporal's ``DefaultPayloadConverter`` makes. The saving is a count: no deep copy
(``dataclasses.asdict``) of an activity's arguments.
"""

from __future__ import annotations

import pytest

pytest.importorskip("temporalio", reason="temporalio is not installed (the temporal extra)")

import dataclasses  # noqa: E402
import uuid  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from temporalio.converter import DataConverter, DefaultPayloadConverter  # noqa: E402

from steadyrun._codec import to_plain  # noqa: E402
from steadyrun.records import (  # noqa: E402
    CallRecord,
    Checkpoint,
    InputRequest,
    RunRecord,
    Step,
)
from steadyrun.temporal import FolderBlobs, TemporalApp, TemporalOptions  # noqa: E402
from steadyrun.temporal._app import workflow_runner  # noqa: E402
from steadyrun.temporal._blobs import LargePayloadCodec  # noqa: E402
from steadyrun.temporal._contextfree import ContextFreeRunner, context_free  # noqa: E402
from steadyrun.temporal._converter import StepPayloadConverter, with_step_converter  # noqa: E402
from steadyrun.temporal._payloads import (  # noqa: E402
    Carried,
    RecordInput,
    RecordOp,
    RunInput,
    SendArgs,
    ToolOutcome,
)


@dataclasses.dataclass
class _Inner:
    when: datetime
    tags: set[str]
    pair: tuple[int, str]
    id: uuid.UUID


@dataclasses.dataclass
class _Outer:
    inner: _Inner
    inners: list[_Inner]
    by_name: dict[str, _Inner]
    nothing: None = None


def _step() -> dict[str, Any]:
    call = CallRecord(
        id="c1",
        name="pay",
        rev=1,
        status="awaiting_input",
        input_request=InputRequest(wait_id="c1.w1", prompt="card?"),
    )
    run = RunRecord(run_id="r", agent="a")
    return to_plain(Step(run=run, checkpoint=Checkpoint(), calls=[call]), Step)  # type: ignore[no-any-return]


def _values() -> list[Any]:
    inner = _Inner(
        when=datetime(2026, 12, 5, 23, 50, tzinfo=UTC),
        tags={"x"},
        pair=(1, "a"),
        id=uuid.UUID(int=7),
    )
    step = _step()
    return [
        None,
        b"raw",
        "text",
        {"b": 1, "a": [1, 2, {"z": None}]},
        RecordInput(run_id="r", ops=[RecordOp(op="save_step", data=step), RecordOp(op="append")]),
        Carried(snapshot={"run": step["run"]}, feed=[{"id": "m"}], consumed=1, generation=2),
        RunInput(agent="a", run_id="r", input="hello"),
        SendArgs(id="m1", content="hi"),
        ToolOutcome(kind="returned", text="ok", value={"n": [1.5, True]}),
        _Outer(inner=inner, inners=[inner, inner], by_name={"k": inner}),
    ]


def test_payloads_are_byte_for_byte_temporal_defaults() -> None:
    ours, theirs = StepPayloadConverter(), DefaultPayloadConverter()
    for value in _values():
        assert ours.to_payloads([value]) == theirs.to_payloads([value]), value


def test_no_deep_copy_of_activity_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    copies = 0
    real = dataclasses.asdict

    def counted(obj: Any, **kw: Any) -> Any:
        nonlocal copies
        copies += 1
        return real(obj, **kw)

    monkeypatch.setattr(dataclasses, "asdict", counted)
    StepPayloadConverter().to_payloads(_values())
    assert copies == 0


def test_the_app_uses_it_and_keeps_a_codec_and_a_converter_of_the_users_own() -> None:
    app = TemporalApp(agents=[])
    assert app.data_converter.payload_converter_class is StepPayloadConverter
    codec = LargePayloadCodec.__new__(LargePayloadCodec)
    with_codec = TemporalApp(agents=[], options=TemporalOptions(payload_codec=codec))
    assert with_codec.data_converter.payload_converter_class is StepPayloadConverter
    assert with_codec.data_converter.payload_codec is codec

    class Own(DefaultPayloadConverter):
        pass

    own = dataclasses.replace(DataConverter.default, payload_converter_class=Own)
    assert with_step_converter(own) is own


def test_the_runner_skips_contexts_only_when_no_part_of_the_converter_takes_one(
    tmp_path: Path,
) -> None:
    plain = TemporalApp(agents=[]).data_converter
    assert context_free(plain)
    assert isinstance(workflow_runner(plain), ContextFreeRunner)
    codec = LargePayloadCodec(FolderBlobs(tmp_path))  # takes the context (blob owners)
    coded = TemporalApp(agents=[], options=TemporalOptions(payload_codec=codec)).data_converter
    assert not context_free(coded)
    assert not isinstance(workflow_runner(coded), ContextFreeRunner)
    assert not isinstance(workflow_runner(), ContextFreeRunner)
