"""A run tree as one JSON document, to move it between stores (``steadyrun runs export``).

The document is what ``RunLifecycle.dump_run`` reads, in JSON, inside an envelope that names
its kind and format::

    {"kind": "steadyrun.run", "format": 1, "run_id": "ticket-4711",
     "exported_at": "2026-01-02T03:04:05+00:00", "steadyrun": "0.1.0",
     "runs": [{"run": {...}, "checkpoint": {...}, "context": [...], "calls": [...],
               "blocks": [...]}, ...],
     "feeds": [{"run_id": "ticket-4711", "messages": [...], "consumed": 2}],
     "woken": false}

``runs`` holds the run and its sub-agent runs (``<run>/<call>``), each as a store loads it;
``feeds`` every input message with its number and how far it was consumed; ``woken`` whether
the run had wake-ups no executor handled. Records are in the stores' own JSON form (the
codec's format 1) and checkpoints carry their own ``format``.

A reader refuses a document whose ``format`` is not the one it knows, rather than guess
(``FormatVersionError``), and a checkpoint of an unknown format likewise.

Format history:
    1: first format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from steadyrun._codec import from_plain, to_plain
from steadyrun._errors import FormatVersionError, StoreError
from steadyrun._version import __version__
from steadyrun.records import CHECKPOINT_FORMAT
from steadyrun.stores._lifecycle import RunDump

__all__ = ["EXPORT_FORMAT", "EXPORT_KIND", "export_document", "read_document"]

EXPORT_FORMAT = 1
"""The format of the run export documents this release writes (and the only one it reads)."""

EXPORT_KIND = "steadyrun.run"
"""The ``kind`` of a run export document."""

_ENVELOPE = ("kind", "format", "exported_at", "steadyrun")


def export_document(dump: RunDump, *, now: datetime | None = None) -> dict[str, Any]:
    """The export document of a dumped run tree (JSON-compatible data; ``json.dumps`` it).

    Args:
        dump: What ``dump_run`` read.
        now: The export's time (UTC); the current time by default.

    Raises:
        StoreError: Part of a record has no JSON form.
    """
    moment = now or datetime.now(UTC)
    body = to_plain(dump, RunDump)
    return {
        "kind": EXPORT_KIND,
        "format": EXPORT_FORMAT,
        "exported_at": moment.isoformat(),
        "steadyrun": __version__,
        **body,
    }


def read_document(document: Mapping[str, Any] | str | bytes) -> RunDump:
    """The run tree of an export document (its data, or its JSON text), checked whole.

    Raises:
        FormatVersionError: The document (or a checkpoint in it) has a format this release
            does not read.
        StoreError: It is not a run export document, or its records do not have their shape.
    """
    if isinstance(document, (str, bytes)):
        try:
            document = json.loads(document)
        except ValueError as exc:
            raise StoreError(f"the run export is not JSON: {exc}") from exc
    if not isinstance(document, Mapping) or document.get("kind") != EXPORT_KIND:
        raise StoreError(f"not a run export document (its kind is not {EXPORT_KIND!r})")
    found = document.get("format")
    # Exactly the int this release writes: ``true`` or ``1.0`` compare equal to 1 but are not it.
    if type(found) is not int or found != EXPORT_FORMAT:
        raise FormatVersionError("run export document", found, EXPORT_FORMAT)
    body = {key: value for key, value in document.items() if key not in _ENVELOPE}
    dump = from_plain(body, RunDump)
    for snap in dump.runs:
        if snap.checkpoint.format != CHECKPOINT_FORMAT:
            raise FormatVersionError(
                f"checkpoint of run {snap.run.run_id!r}", snap.checkpoint.format, CHECKPOINT_FORMAT
            )
    return dump
