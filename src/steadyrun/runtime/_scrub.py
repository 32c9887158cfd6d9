"""Text no store can encode: found and replaced before anything is written.

Python strings may hold lone surrogates (a provider's escaped U+DC80, bytes decoded with
``surrogateescape``) that UTF-8, and so every store, refuses. Model output and what tools hand
back get U+FFFD in their place, so a run never fails to save because of them.
"""

from __future__ import annotations

import re
from dataclasses import replace

from steadyrun.records import CallRecord

__all__ = ["scrub", "scrub_record", "storable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scrub(text: str) -> str:
    """``text`` with U+FFFD in place of each lone surrogate (unchanged when it has none)."""
    if storable(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def scrub_record(record: CallRecord) -> CallRecord:
    """A record whose texts from tools (result, error, input prompt) can be stored.

    Payloads, input states and completion values are the host's data and are not rewritten:
    the runtime refuses them before they reach a record (the call fails, the model is told).
    """
    result = scrub(record.result) if record.result is not None else None
    error = scrub(record.error) if record.error is not None else None
    request = record.input_request
    if request is not None and not storable(request.prompt):
        request = replace(request, prompt=scrub(request.prompt))
    if (result, error, request) == (record.result, record.error, record.input_request):
        return record
    return replace(record, result=result, error=error, input_request=request)
