"""A run's state in memory, and the changes since its last save."""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import datetime

from steadyrun.chat import Message
from steadyrun.records import (
    Block,
    CallRecord,
    Checkpoint,
    ContextChange,
    RunRecord,
    RunSnapshot,
    Step,
)
from steadyrun.records._copy import copied
from steadyrun.records._stored import StoredSnapshot

__all__ = ["RunState"]


class RunState:
    """The live state of one run: what it would load from its store, plus unsaved changes.

    A step carries only what changed since the previous one, so the cost of a save does not
    grow with the run: new context messages (the log is append-only), new or changed blocks,
    and call snapshots that were not already written by ``save_call``.
    """

    def __init__(
        self,
        run: RunRecord,
        checkpoint: Checkpoint,
        context: list[Message],
        calls: list[CallRecord],
        blocks: list[Block],
    ) -> None:
        self.run = run
        self.cp = checkpoint
        self.context = context
        self.calls: MutableMapping[str, CallRecord] = {c.id: c for c in calls}
        self._blocks: list[Block] | None = blocks
        self._stored_blocks: StoredSnapshot | None = None  # read when the blocks are
        self._later_blocks: list[Block] = []  # added before they were read
        self.seen = set(checkpoint.seen_inputs)
        self._appended: list[Message] = []
        self._base: list[Message] | None = None
        self._unsaved_calls: dict[str, CallRecord] = {}
        self._new_blocks: list[Block] = []
        self.generation = 0  # counts rewrites: what was learnt of the old context is void

    @classmethod
    def new(cls, run_id: str, agent: str, now: datetime) -> RunState:
        """The state of a run that has not saved anything yet."""
        return cls(
            RunRecord(run_id=run_id, agent=agent, created_at=now, updated_at=now),
            Checkpoint(),
            [],
            [],
            [],
        )

    @classmethod
    def restore(cls, snap: RunSnapshot) -> RunState:
        """The state a loaded snapshot describes.

        Of a ``StoredSnapshot``, the calls are decoded one by one as the run reads them and
        the blocks when first read: a resume reads few of either.
        """
        if not isinstance(snap, StoredSnapshot):
            return cls(snap.run, snap.checkpoint, snap.context, snap.calls, snap.blocks)
        state = cls(snap.run, snap.checkpoint, snap.context, [], [])
        state.calls = snap.call_table()
        state._blocks, state._stored_blocks = None, snap
        return state

    @property
    def blocks(self) -> list[Block]:
        """Every block of the run, by position."""
        if self._blocks is None:
            assert self._stored_blocks is not None
            self._blocks = self._stored_blocks.blocks
            self._blocks.extend(self._later_blocks)
            self._stored_blocks, self._later_blocks = None, []
        return self._blocks

    @blocks.setter
    def blocks(self, blocks: list[Block]) -> None:
        self._blocks, self._stored_blocks, self._later_blocks = blocks, None, []

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.run.run_id

    def append(self, message: Message) -> None:
        """Append a message to the model context."""
        self.context.append(message)
        self._appended.append(message)
        self.cp.context_length = len(self.context)

    def rewrite(self, messages: list[Message]) -> None:
        """Replace the whole context (clearing, a summary, a reducer); saved once as a new base."""
        self.context = list(messages)
        self._base = list(messages)
        self._appended = []
        self.cp.context_length = len(self.context)
        self.generation += 1

    def add_block(self, block: Block) -> None:
        """Add a block at the next position."""
        (self._later_blocks if self._blocks is None else self._blocks).append(block)
        self._new_blocks.append(block)
        self.cp.next_position = block.position + 1

    def change_block(self, block: Block) -> None:
        """Replace the block with ``block``'s id (same position); saved with the next step."""
        self.blocks = [block if b.id == block.id else b for b in self.blocks]
        self._new_blocks = [b for b in self._new_blocks if b.id != block.id] + [block]

    def put_call(self, call: CallRecord, *, saved: bool) -> None:
        """Record a call's new snapshot; ``saved`` when ``save_call`` already wrote it."""
        self.calls[call.id] = call
        if saved:
            self._unsaved_calls.pop(call.id, None)
        else:
            self._unsaved_calls[call.id] = call

    def mark_seen(self, key: str) -> None:
        """Remember an input message key so it never enters the context twice."""
        self.seen.add(key)
        self.cp.seen_inputs.append(key)

    def forget_seen(self) -> None:
        """Drop the remembered keys (a new turn: the claimed position guards older input)."""
        self.seen.clear()
        self.cp.seen_inputs = []

    def take_step(self, now: datetime) -> Step:
        """The step holding every change since the last one; the trackers start over."""
        self.run.updated_at = now
        self.run.steps += 1
        step = Step(
            run=copied(self.run),
            checkpoint=copied(
                self.cp, batch=list(self.cp.batch), seen_inputs=list(self.cp.seen_inputs)
            ),
            context=ContextChange(
                base=self._base,
                append=self._appended,
                start=len(self.context) - len(self._appended),
            ),
            blocks=self._new_blocks,
            calls=list(self._unsaved_calls.values()),
        )
        self._appended = []
        self._base = None
        self._new_blocks = []
        self._unsaved_calls = {}
        return step

    def batch_calls(self) -> list[CallRecord]:
        """The records of the open batch, in call order."""
        return [self.calls[i] for i in self.cp.batch]
