"""Idempotent starts: a start request's fingerprint, where it is kept, a run's successor key.

``App``, ``Operations`` and the engines all start and cancel runs and share these (with the
outcomes ``Started`` and ``Cancelled``), so none imports another for them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["START_META", "Cancelled", "Started", "start_fingerprint", "successor_key"]

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


@dataclass(frozen=True, kw_only=True, slots=True)
class Cancelled:
    """The outcome of ``Operations.cancel``.

    Attributes:
        run_id: The run.
        runs: The runs cancelled now: the run and its sub-agent runs (empty: it was already).
        calls: ``(run id, call id)`` of the calls settled ``cancelled``.
    """

    run_id: str
    runs: list[str]
    calls: list[tuple[str, str]]
