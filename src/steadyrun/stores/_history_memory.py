"""The step history of ``MemoryStore``: entries by step number and the archived log segments."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from steadyrun._codec import decode, decode_all
from steadyrun._errors import StoreError
from steadyrun.records import Step
from steadyrun.records._history import StepEntry
from steadyrun.stores._history import encode_entry, entry_of, next_segment, start_of

__all__ = ["MemoryHistory", "PlannedEntry"]


@dataclass(slots=True)
class PlannedEntry:
    """A step's entry, encoded before the store changes anything.

    Attributes:
        step: The step number.
        segment: Its segment.
        archive: The segment to archive the current log as first, if the step rewrites it.
        data: The encoded entry.
    """

    step: int
    segment: int
    archive: int | None
    data: bytes


@dataclass(slots=True)
class MemoryHistory:
    """One run's step entries and the segments of its context log that rewrites replaced.

    Attributes:
        steps: Step numbers with an entry, ascending (steps are saved in order, so finding
            the previous one stays cheap however long the run).
        entries: Step number to ``(segment, encoded entry)``.
        archive: Segment number to its encoded messages.
    """

    steps: list[int] = field(default_factory=list)
    entries: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    archive: dict[int, list[bytes]] = field(default_factory=dict)

    def plan(self, step: Step, log_length: int) -> PlannedEntry:
        """The entry of ``step`` on a log of ``log_length`` messages (nothing changes yet)."""
        number = step.run.steps
        at = bisect.bisect_left(self.steps, number)
        previous = self.entries[self.steps[at - 1]][0] if at else None
        segment, archive = next_segment(previous, step.context.base is not None)
        data = encode_entry(entry_of(step, segment, start_of(step, log_length)))
        return PlannedEntry(number, segment, segment - 1 if archive else None, data)

    def apply(self, planned: PlannedEntry, old_log: list[bytes]) -> None:
        """Record a planned entry; ``old_log`` is the log the step replaced (when it did)."""
        if planned.archive is not None:
            # A rewrite saved again finds its segment archived already: the first one stays.
            self.archive.setdefault(planned.archive, old_log)
        if planned.step not in self.entries:
            bisect.insort(self.steps, planned.step)
        self.entries[planned.step] = (planned.segment, planned.data)

    def listed(self) -> list[StepEntry]:
        """The entries, by step number."""
        return decode_all((self.entries[n][1] for n in self.steps), StepEntry)

    def context_at(self, step: int, log: list[bytes]) -> list[bytes] | None:
        """The encoded context after ``step`` (``log``: the current log), or ``None``."""
        found = self.entries.get(step)
        if found is None:
            return None
        segment = found[0]
        length = decode(found[1], StepEntry).checkpoint.context_length
        current = self.entries[self.steps[-1]][0]
        messages = log if segment == current else self.archive.get(segment)
        if messages is None or len(messages) < length:
            raise StoreError(f"the context log of step {step} is missing (segment {segment})")
        return messages[:length]
