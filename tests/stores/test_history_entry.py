"""A step's history entry as stored (``encode_entry``): defaults left out, read back whole."""

from __future__ import annotations

import json
from datetime import UTC

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from steadyrun._codec import decode
from steadyrun.chat import Usage
from steadyrun.records import Checkpoint, StepCall, StepEnding, StepEntry
from steadyrun.stores._history import encode_entry

texts = st.text(max_size=8)
plain = (
    st.none()
    | st.booleans()
    | st.integers()
    | texts
    | st.floats(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    plain, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3)
)
checkpoints = st.builds(
    Checkpoint,
    phase=st.sampled_from(["model", "batch", "done"]),
    turn=st.integers(0, 3),
    iteration=st.integers(0, 3),
    batch=st.lists(texts, max_size=2),
    seen_inputs=st.lists(texts, max_size=2),
    extra=st.dictionaries(texts, values, max_size=2),
)
entries = st.builds(
    StepEntry,
    step=st.integers(0, 10**6),
    at=st.none() | st.datetimes(timezones=st.just(UTC)),
    status=st.sampled_from(["running", "suspended", "completed", "failed"]),
    segment=st.integers(0, 3),
    start=st.integers(0, 900),
    rewrote=st.booleans(),
    calls=st.lists(st.builds(StepCall, id=texts, status=texts), max_size=3),
    usage=st.builds(Usage, requests=st.integers(0, 9), input_tokens=st.integers(0, 99)),
    checkpoint=st.just(Checkpoint()) | checkpoints,
    ending=st.none() | st.builds(StepEnding, text=st.none() | texts, completion=values),
)

_ENTRY: TypeAdapter[StepEntry] = TypeAdapter(StepEntry)


def reference_form(entry: StepEntry) -> dict[str, object]:
    """The entry as it was first written: plain data without defaults, the format always."""
    data = _ENTRY.dump_python(entry, mode="json", exclude_defaults=True)
    data.setdefault("checkpoint", {})["format"] = entry.checkpoint.format
    return {"format": 1, "data": data}


@given(entries)
def test_an_entry_reads_back_whole_and_as_it_was_first_written(entry: StepEntry) -> None:
    raw = encode_entry(entry)
    assert decode(raw, StepEntry) == entry
    assert json.loads(raw) == reference_form(entry)


def test_the_checkpoint_format_is_written_even_at_its_default() -> None:
    # A later checkpoint version must never read an old entry as its own.
    doc = json.loads(encode_entry(StepEntry(step=1)))
    assert doc == {"format": 1, "data": {"step": 1, "checkpoint": {"format": 1}}}
    doc = json.loads(encode_entry(StepEntry(step=2, checkpoint=Checkpoint(turn=2))))
    assert doc["data"]["checkpoint"] == {"format": 1, "turn": 2}
