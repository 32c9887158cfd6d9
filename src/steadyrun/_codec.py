"""One codec at the storage boundary: dataclasses to versioned JSON and back.

Every document is wrapped as ``{"format": N, "data": ...}``. A reader refuses a format it does
not know rather than guess. Pydantic type adapters do the work; they are built once per type.

A document is read in one pass: pydantic-core parses the stored bytes and validates the
envelope with its data, 2.4 times faster than ``json.loads`` followed by ``validate_python``
on the plain data (a run of 400 iterations: 12.9 to 5.4 ms), which was most of a resume. The
reader of a type is built around the core schema its adapter already has (0.2 ms for the five
stored types, where new ``TypeAdapter``s of envelope types took 12 ms). Anything that pass
refuses (another format, garbage, data that does not fit) is read again the slow way, which
says precisely what is wrong.

Format history:
    1: first format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, TypeVar, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer, SchemaValidator
from pydantic_core import core_schema as cs

from steadyrun._errors import FormatVersionError, StoreError
from steadyrun._fast_json import writer as _quick_writer

__all__ = ["FORMAT", "decode", "decode_all", "encode", "framed", "from_plain", "to_plain"]

FORMAT = 1
"""The codec's current format version."""

T = TypeVar("T")

_HEAD = b'{"format":%d,"data":' % FORMAT


_adapters: dict[Any, TypeAdapter[Any]] = {}
_readers: dict[Any, SchemaValidator] = {}  # by the type of the data
_writers: dict[Any, SchemaSerializer] = {}  # by the type of the data
# msgspec's writers, by the type of the data (``None``: that type is always pydantic's)
_quick: dict[Any, Callable[[Any], bytes | None] | None] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    adapter = _adapters.get(tp)
    if adapter is None:
        adapter = _adapters[tp] = TypeAdapter(tp)
    return adapter


def _reader(tp: Any) -> SchemaValidator:
    """Reads a list of stored documents of ``tp``, each parsed from its own bytes or text.

    Each element is a JSON text of its own (never joined with the others: rows joined into one
    text could be read across their borders). The envelope's ``format`` must be a JSON integer
    (strict: ``true`` and ``1.0`` are not versions); unknown keys are ignored, as ``json.loads``
    readers always ignored them.
    """
    reader = _readers.get(tp)
    if reader is None:
        envelope = cs.typed_dict_schema(
            {
                "format": cs.typed_dict_field(cs.int_schema(strict=True)),
                "data": cs.typed_dict_field(_adapter(tp).core_schema),
            }
        )
        reader = _readers[tp] = SchemaValidator(cs.list_schema(cs.json_schema(envelope)))
    return reader


def to_plain(obj: Any, tp: Any | None = None) -> Any:
    """Turn a dataclass (or list/dict of them) into JSON-compatible Python data.

    Raises ``StoreError`` when part of the value has no JSON form.
    """
    tp = tp if tp is not None else type(obj)
    try:
        return _adapter(tp).dump_python(obj, mode="json", exclude_none=False)
    except PydanticSerializationError as exc:
        raise StoreError(f"cannot store {_name(tp)}: {exc}") from exc


def from_plain(data: Any, tp: type[T]) -> T:
    """Rebuild a typed value from JSON-compatible data; raises ``StoreError`` if it does not fit."""
    try:
        value = cast(T, _adapter(tp).validate_python(data))
    except ValidationError as exc:
        raise StoreError(f"stored data does not match {_name(tp)}: {exc}") from exc
    return value


def encode(obj: Any, tp: Any | None = None) -> bytes:
    """Serialise ``obj`` as a versioned JSON document."""
    tp = tp if tp is not None else type(obj)
    try:
        quick = _quick[tp]
    except KeyError:
        quick = _quick[tp] = _quick_writer(tp)
    if quick is not None:
        # Written as pydantic would, byte for byte, 2-3 times faster (``_fast_json``);
        # ``None`` for a value it leaves to pydantic.
        data = quick(obj)
        if data is not None:
            return _HEAD + data + b"}"
    writer = _writers.get(tp)
    if writer is None:
        writer = _writers[tp] = _adapter(tp).serializer
    try:
        # One pass through pydantic-core (its serializer called directly: the adapter's
        # wrapper took a third of the time of a small document); the envelope is spliced
        # around its output.
        data = writer.to_json(obj)
    except PydanticSerializationError as exc:
        raise StoreError(f"cannot store {_name(tp)}: {exc}") from exc
    return _HEAD + data + b"}"


def decode(raw: bytes | str, tp: type[T]) -> T:
    """Read a versioned JSON document written by ``encode``.

    Raises:
        FormatVersionError: The document is of a format this version does not read.
        StoreError: It is not a steadyrun document, or its data does not fit ``tp``.
    """
    try:
        (doc,) = _reader(tp).validate_python([raw])
    except ValidationError:
        return _decode_slowly(raw, tp)  # to say what is wrong, exactly as it always said
    return _data(doc, tp)


def decode_all(raws: Iterable[bytes | str], tp: type[T]) -> list[T]:
    """``decode`` of many documents of one type, in order, in one call into pydantic-core.

    Raises what ``decode`` raises for the first document it refuses.
    """
    raws = list(raws)
    try:
        docs = _reader(tp).validate_python(raws)
    except ValidationError:
        return [decode(raw, tp) for raw in raws]  # the first refused one says why
    # One comprehension, no call per document (a load decodes 400 and more of them).
    data = [doc["data"] for doc in docs if doc["format"] == FORMAT]
    if len(data) != len(docs):
        return [_data(doc, tp) for doc in docs]  # the first of another format says which
    return cast(list[T], data)


def framed(raws: Iterable[bytes | str]) -> bool:
    """Whether each document is bytes in the envelope ``encode`` writes, of the current format.

    A check of the first bytes only, so that a reader may keep the documents and decode them
    later: what is not framed so (another format, another writer's spacing) is decoded at once,
    to be refused or read as ``decode`` does.
    """
    try:
        # bytes.startswith over the documents in C (a load checks 800 and more of them); it
        # refuses anything that is not bytes (a str, a memoryview) with a TypeError.
        return all(map(_starts, cast("Iterable[bytes]", raws), repeat(_HEAD)))
    except TypeError:
        return False


_starts = bytes.startswith


def _data(doc: dict[str, Any], tp: type[T]) -> T:
    if doc["format"] != FORMAT:
        raise FormatVersionError(_name(tp), doc["format"], FORMAT)
    return cast(T, doc["data"])


def _decode_slowly(raw: bytes | str, tp: type[T]) -> T:
    """``decode`` in two passes: the envelope first, then its data (errors named apart)."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise StoreError(f"stored {_name(tp)} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or "format" not in doc or "data" not in doc:
        raise StoreError(f"stored {_name(tp)} is not a steadyrun document")
    # Exactly the int this release writes: ``true`` or ``1.0`` compare equal to 1 but are not it.
    if type(doc["format"]) is not int or doc["format"] != FORMAT:
        raise FormatVersionError(_name(tp), doc["format"], FORMAT)
    return from_plain(doc["data"], tp)


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)
