"""Taking input from a run's feed into its context: once per message id and revision, in order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from steadyrun._errors import TurnLimitExceeded
from steadyrun.chat import MediaPart, Message, Part, TextPart
from steadyrun.records import Block
from steadyrun.runtime._host import BY_META
from steadyrun.runtime._state import RunState
from steadyrun.stores import Claim, FeedMessage, Store

__all__ = ["Fresh", "TurnLimit", "fresh_input", "take_input", "turn_limit_failure"]


@dataclass(slots=True)
class Fresh:
    """Claimed input not yet in the context, and the boundary claimed."""

    end_seq: int
    messages: list[FeedMessage]

    def __bool__(self) -> bool:
        return bool(self.messages)


class TurnLimit(Exception):
    """Taking the input would start one turn more than ``Limits.max_turns`` allows."""

    def __init__(self, turns: int) -> None:
        super().__init__(turns)
        self.turns = turns


def turn_limit_failure(exc: TurnLimit, max_turns: int | None) -> TurnLimitExceeded:
    """The failure for a claim that would start one turn too many."""
    return TurnLimitExceeded(
        f"the run has had {exc.turns} turn(s) (Limits.max_turns={max_turns}); "
        "start a new run to continue the conversation"
    )


async def fresh_input(
    store: Store, state: RunState, waiting: int | None = None, claim: Claim | None = None
) -> Fresh:
    """Claim what the feed holds and return the messages not yet in the context.

    ``waiting``: what the feed holds above the claimed position, when the last step's commit
    said so (``Journal.save_step``); ``None``: read it from the store. ``claim``: the feed
    already claimed by the caller (a worker that read a new run's first input to find its
    agent); input appended since is seen by the step's commit, as any input during a step.
    """
    cp = state.cp
    if claim is None:
        through = waiting
        if through is None:
            through = await store.pending(state.run_id, cp.claimed_through)
        if not through:
            return Fresh(0, [])
        claim = await store.claim(state.run_id, through)
    # Below the claimed position nothing is taken again; above it, a key is taken once even
    # if a store hands the message back twice (in this claim, or since the turn began).
    seen = set(state.seen)
    fresh = []
    for m in claim.messages:
        if m.seq > cp.claimed_through and m.key not in seen:
            seen.add(m.key)
            fresh.append(m)
    if not fresh:  # only duplicates: nothing to take, but the boundary moves past them
        cp.claimed_through = max(cp.claimed_through, claim.end_seq)
    return Fresh(claim.end_seq, fresh)


def take_input(
    state: RunState,
    fresh: Fresh,
    *,
    new_turn: bool,
    max_turns: int | None,
    at: datetime | None = None,
) -> None:
    """Append claimed input to the context (a new turn when the run was idle).

    Each message is also recorded as an ``input`` block (saved with the step), so the run's
    timeline shows what it was told, by whom and when.
    """
    cp = state.cp
    if new_turn:
        if max_turns is not None and cp.turn >= max_turns:
            raise TurnLimit(cp.turn)  # before anything changes: the input stays unclaimed
        cp.turn += 1
        # The earlier turns' input lies at or below the claimed position, which guards it:
        # the keys need not be carried into every checkpoint of a long conversation.
        state.forget_seen()
    cp.claimed_through = max(cp.claimed_through, fresh.end_seq)
    cp.iteration = 0
    cp.phase = "model"
    for m in fresh.messages:
        state.mark_seen(m.key)
        parts: list[Part] = [TextPart(text=m.content)]
        parts += [MediaPart(ref=ref) for ref in m.media]
        state.append(Message(role=m.role, parts=parts, id=m.id, revision=m.revision, meta=m.meta))
        state.add_block(
            Block(
                id=f"in{m.seq}",
                kind="input",
                position=cp.next_position,
                text=m.content,
                turn=cp.turn,
                role=m.role,
                message_id=m.id,
                by=(m.meta or {}).get(BY_META),
                at=at,
            )
        )
