"""How the SQL stores write values: times as microseconds since the epoch, scripts split.

SQLite and PostgreSQL keep the same integers, so a run moves between them unchanged. Every
SQL module of the stores imports these; none borrows them from another store's module.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, overload

__all__ = ["from_us", "statements", "to_us"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def to_us(value: datetime | None) -> int | None:
    """Microseconds since the epoch (a naive time is taken as UTC); ``None`` stays ``None``."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # Integer arithmetic: a float timestamp would round some microseconds away.
    return (value - _EPOCH) // _US


@overload
def from_us(value: int) -> datetime: ...
@overload
def from_us(value: None) -> None: ...
def from_us(value: Any) -> datetime | None:
    """The UTC time of a count of microseconds since the epoch; ``None`` stays ``None``."""
    return None if value is None else _EPOCH + value * _US


def statements(script: str) -> list[str]:
    """The statements of a script, split at its semicolons."""
    return [s.strip() for s in script.split(";") if s.strip()]
