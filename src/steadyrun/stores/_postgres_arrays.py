"""The loop step's arrays in PostgreSQL's binary format, built in one pass.

``save_loop_step`` takes up to twelve ``text[]``, ``bigint[]`` and ``bytea[]`` arguments per
step. psycopg dumps a Python list by inspecting it first (the element type, the dimensions, a
dumper per element, an upgrade of ``int`` to the smallest fitting type) and only then writing
it: most of its adapting time per step. The store knows each array's element type, so it
writes the bytes (``array_send``'s layout) itself and hands psycopg a ``bytes`` subclass whose
dumper passes them through with the array's type. The server checks the layout as it reads.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from psycopg import adapt, postgres, pq
from psycopg.adapt import AdaptersMap

__all__ = [
    "ByteaArray",
    "Int8Array",
    "TextArray",
    "bytea_array",
    "int8_array",
    "register",
    "text_array",
]

# ndim, has NULL, element type, then the one dimension: its length and its lower bound
_HEAD = struct.Struct("!iiIii")
_LENGTH = struct.Struct("!i")
_INT8 = struct.Struct("!iq")  # the length (8) and the value
_NULL = _LENGTH.pack(-1)


class TextArray(bytes):
    """A ``text[]`` already in binary format."""


class Int8Array(bytes):
    """A ``bigint[]`` already in binary format."""


class ByteaArray(bytes):
    """A ``bytea[]`` already in binary format."""


def _array(elements: Sequence[bytes | None], oid: int) -> bytes:
    parts = [b""]
    nulls = 0
    for e in elements:
        if e is None:
            nulls = 1
            parts.append(_NULL)
        else:
            parts.append(_LENGTH.pack(len(e)))
            parts.append(e)
    parts[0] = _HEAD.pack(1, nulls, oid, len(elements), 1)
    return b"".join(parts)


_TEXT = postgres.types["text"].oid
_BIGINT = postgres.types["int8"].oid
_BYTEA = postgres.types["bytea"].oid


def text_array(values: Sequence[str | None]) -> TextArray:
    """``values`` as a ``text[]``."""
    return TextArray(_array([None if v is None else v.encode() for v in values], _TEXT))


def int8_array(values: Sequence[int | None]) -> Int8Array:
    """``values`` as a ``bigint[]``."""
    if None in values:
        parts = [_NULL if v is None else _INT8.pack(8, v) for v in values]
        return Int8Array(_HEAD.pack(1, 1, _BIGINT, len(values), 1) + b"".join(parts))
    return Int8Array(
        _HEAD.pack(1, 0, _BIGINT, len(values), 1) + b"".join([_INT8.pack(8, v) for v in values])
    )


def bytea_array(values: Sequence[bytes | None]) -> ByteaArray:
    """``values`` as a ``bytea[]``."""
    return ByteaArray(_array(values, _BYTEA))


class _Passed(adapt.Dumper):
    """Sends an array's bytes as they are, typed by the class attribute ``oid``."""

    format = pq.Format.BINARY

    def dump(self, obj: bytes) -> bytes:
        return obj


class _TextArrayDumper(_Passed):
    oid = postgres.types["text"].array_oid


class _Int8ArrayDumper(_Passed):
    oid = postgres.types["int8"].array_oid


class _ByteaArrayDumper(_Passed):
    oid = postgres.types["bytea"].array_oid


def register(adapters: AdaptersMap) -> None:
    """Make ``adapters`` (a connection's) send the arrays built here."""
    adapters.register_dumper(TextArray, _TextArrayDumper)
    adapters.register_dumper(Int8Array, _Int8ArrayDumper)
    adapters.register_dumper(ByteaArray, _ByteaArrayDumper)
