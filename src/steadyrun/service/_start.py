"""Idempotent starts: a start request's fingerprint, where it is kept, a run's successor key.

``App`` and ``Operations`` both start runs and share these, so neither imports the other for
them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["START_META", "Started", "start_fingerprint", "successor_key"]

START_META = "steadyrun.start"
"""Key of the start request's fingerprint in the meta of a run's first input message."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Started:
    """The outcome of ``App.start``.

    Attributes:
        run_id: The run.
        created: Whether this request started it (``False``: the same request came before).
        status: The run's status as stored (``running`` while it starts).
    """

    run_id: str
    created: bool
    status: str


def start_fingerprint(agent: str, input: str, extra: dict[str, Any] | None = None) -> str:
    """The hash that tells two start requests apart (canonical JSON, SHA-256)."""
    body = {"agent": agent, "input": input, **(extra or {})}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def successor_key(run_id: str) -> str:
    """The feed key whose first message names the successor of ``run_id``."""
    return f"steadyrun:successor:{run_id}"
