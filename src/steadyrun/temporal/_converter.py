"""The worker's payload converter: Temporal's default, without a deep copy of every argument.

Temporal's JSON converter turns a dataclass into JSON through ``dataclasses.asdict``, which
rebuilds the whole value, copying every list, dict and leaf on the way. steadyrun's activity
arguments carry runs' steps as plain data (``RecordInput``, ``Carried``), so that copy was a
large share of a workflow task's CPU, and inside the sandbox each of its ``isinstance`` checks
goes through the sandbox's wrapper. ``StepPayloadConverter`` gives ``json`` one level of a
dataclass at a time (its fields, by name) and lets the C encoder walk the rest: the same
JSON text (keys are sorted either way), so the same payload bytes, histories and replays.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

__all__ = ["ShallowJSONEncoder", "StepPayloadConverter", "with_step_converter"]


class ShallowJSONEncoder(AdvancedJSONEncoder):
    """``AdvancedJSONEncoder`` that hands ``json`` a dataclass's fields instead of a deep copy."""

    def default(self, o: Any) -> Any:
        """A dataclass instance as a dict of its fields; anything else as Temporal encodes it."""
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
        return super().default(o)


class StepPayloadConverter(CompositePayloadConverter):
    """Temporal's ``DefaultPayloadConverter`` with ``ShallowJSONEncoder`` for ``json/plain``."""

    def __init__(self) -> None:
        super().__init__(
            *(
                JSONPlainPayloadConverter(encoder=ShallowJSONEncoder)
                if isinstance(c, JSONPlainPayloadConverter)
                else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


def with_step_converter(converter: DataConverter) -> DataConverter:
    """``converter`` with ``StepPayloadConverter`` when it uses Temporal's default one.

    A converter of the user's own (another payload converter class) is kept as it is.
    """
    if converter.payload_converter_class is not DefaultPayloadConverter:
        return converter
    return dataclasses.replace(converter, payload_converter_class=StepPayloadConverter)
