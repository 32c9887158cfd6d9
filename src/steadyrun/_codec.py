"""One codec at the storage boundary: dataclasses to versioned JSON and back.

Every document is wrapped as ``{"format": N, "data": ...}``. A reader refuses a format it does
not know rather than guess. Pydantic type adapters do the work; they are built once per type.

A document is read in one pass: pydantic-core parses the stored bytes and validates the
envelope with its data (``validate_json``), about three times faster than ``json.loads``
followed by ``validate_python`` on the plain data, which is what resume spent its time on.
Anything that pass refuses (another format, garbage, data that does not fit) is read again
the slow way, which says precisely what is wrong.

Format history:
    1: first format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar, cast

from pydantic import Json, Strict, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from steadyrun._errors import FormatVersionError, StoreError

__all__ = ["FORMAT", "decode", "decode_all", "encode", "from_plain", "to_plain"]

FORMAT = 1
"""The codec's current format version."""

T = TypeVar("T")

_HEAD = b'{"format":%d,"data":' % FORMAT


_adapters: dict[Any, TypeAdapter[Any]] = {}
_documents: dict[Any, TypeAdapter[Any]] = {}  # by the type of the data
_many: dict[Any, TypeAdapter[Any]] = {}  # lists of documents, by the type of the data


@dataclass(slots=True)
class _Document(Generic[T]):
    """The envelope as pydantic reads it: extra keys ignored, ``format`` a JSON integer."""

    format: Annotated[int, Strict()]  # strict: ``true`` or ``1.0`` are not a version
    data: T


def _adapter(tp: Any) -> TypeAdapter[Any]:
    adapter = _adapters.get(tp)
    if adapter is None:
        adapter = _adapters[tp] = TypeAdapter(tp)
    return adapter


def _document(tp: Any) -> TypeAdapter[Any]:
    adapter = _documents.get(tp)
    if adapter is None:
        adapter = _documents[tp] = TypeAdapter(_Document[tp])
    return adapter


def _documents_of(tp: Any) -> TypeAdapter[Any]:
    adapter = _many.get(tp)
    if adapter is None:
        # Each element parsed on its own (Json): rows joined into one JSON text could be read
        # across their borders, and a damaged row must fail as it would alone.
        adapter = _many[tp] = TypeAdapter(list[Json[_Document[tp]]])
    return adapter


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
        # One pass through pydantic-core; the envelope is spliced around its output.
        data = _adapter(tp).dump_json(obj)
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
        doc = _document(tp).validate_json(raw)
    except ValidationError:
        return _decode_slowly(raw, tp)  # to say what is wrong, exactly as it always said
    if doc.format != FORMAT:
        raise FormatVersionError(_name(tp), doc.format, FORMAT)
    return cast(T, doc.data)


def decode_all(raws: Iterable[bytes | str], tp: type[T]) -> list[T]:
    """``decode`` of many documents of one type, in order, in one call into pydantic-core.

    Raises what ``decode`` raises for the first document it refuses.
    """
    raws = list(raws)
    try:
        docs = _documents_of(tp).validate_python(raws)
    except ValidationError:
        return [decode(raw, tp) for raw in raws]  # the first refused one says why
    for doc in docs:
        if doc.format != FORMAT:
            raise FormatVersionError(_name(tp), doc.format, FORMAT)
    return [doc.data for doc in docs]


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
