"""Checks of ``Feed``: numbering, deduplication, pending, claim, consume and waiting for input."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from steadyrun._errors import StoreError
from steadyrun.chat import MediaRef
from steadyrun.records import Checkpoint, ContextChange, Step
from steadyrun.stores import FeedMessage, Store
from steadyrun.testing.conformance._expect import expect, expect_equal, expect_raises, fail
from steadyrun.testing.conformance._records import RUN, msg, run_row, step, user
from steadyrun.testing.conformance._registry import CheckList

__all__ = ["CHECKS"]

CHECKS = CheckList("feed")
"""The feed checks, in order."""

_WAIT = 10.0
"""``max_wait`` of waits that input must end early: far above any wake-up or poll interval."""

_PROMPT = 5.0
"""How soon such a wait must end: a functional bound (it woke), not a performance figure."""


async def _fill(store: Store, n: int, run_id: str = RUN) -> list[FeedMessage]:
    return [await store.append(run_id, msg(f"m{i}")) for i in range(1, n + 1)]


async def _claimed_ids(store: Store, through: int) -> list[str]:
    return [m.id for m in (await store.claim(RUN, through)).messages]


@CHECKS.rule("append_numbers_from_one")
async def append_numbers_from_one(store: Store) -> None:
    """``append`` numbers a run's messages 1, 2, 3... and returns the stored message."""
    appended = await _fill(store, 4)
    expect_equal([m.seq for m in appended], [1, 2, 3, 4], "seq of four appends")
    expect_equal(appended[0], replace(msg("m1"), seq=1), "message returned by append")


@CHECKS.rule("runs_are_numbered_independently")
async def runs_are_numbered_independently(store: Store) -> None:
    """Each run's feed has its own numbering, messages, pending input and consumed boundary."""
    await _fill(store, 3, "run-a")
    other = await store.append("run-b", msg("m1", content="for b"))
    expect_equal(other.seq, 1, "seq of the first message of a second run")
    await store.consume("run-a", 3)
    expect_equal(await store.pending("run-b", 0), 1, "pending of run-b after run-a consumed")
    claim = await store.claim("run-b", 1)
    expect_equal([m.content for m in claim.messages], ["for b"], "run-b's claimed content")
    expect_equal(await store.pending("run-c", 0), 0, "pending of a run without input")


@CHECKS.rule("append_keeps_every_field")
async def append_keeps_every_field(store: Store) -> None:
    """A message keeps id, revision, role, content, media and meta through append and claim."""
    ref = MediaRef(key="k", mime="image/png", size=4, sha256="ff")
    sent = FeedMessage(
        id="m1", revision="r7", role="system", content="ünïcode ✓", media=[ref], meta={"a": "b"}
    )
    stored = await store.append(RUN, sent)
    expect_equal(stored, replace(sent, seq=1), "message returned by append")
    expect_equal((await store.claim(RUN, 1)).messages, [stored], "claimed message")


@CHECKS.rule("duplicate_returns_existing_message")
async def duplicate_returns_existing_message(store: Store) -> None:
    """Appending an id and revision already in the feed returns the stored message, unchanged."""
    await _fill(store, 2)
    again = await store.append(RUN, msg("m1", content="different text"))
    expect_equal(again, replace(msg("m1"), seq=1), "append of a duplicate")
    expect_equal(await store.pending(RUN, 0), 2, "pending after a duplicate")
    claim = await store.claim(RUN, 2)
    expect_equal(claim.messages[0].content, "text of m1", "content after a duplicate")


@CHECKS.rule("new_revision_is_new_input")
async def new_revision_is_new_input(store: Store) -> None:
    """A new revision of a message id is appended as new input."""
    await _fill(store, 2)
    revised = await store.append(RUN, msg("m1", revision="2", content="edited"))
    expect_equal(revised.seq, 3, "seq of a new revision")
    expect_equal((await store.append(RUN, msg("m1", "2"))).seq, 3, "seq of that revision again")
    claim = await store.claim(RUN, 3)
    expect_equal(
        [(m.id, m.revision, m.content) for m in claim.messages],
        [("m1", "1", "text of m1"), ("m2", "1", "text of m2"), ("m1", "2", "edited")],
        "claimed messages",
    )


@CHECKS.rule("dedup_keys_on_the_id_revision_pair")
async def dedup_keys_on_the_id_revision_pair(store: Store) -> None:
    """Deduplication compares id and revision as a pair: no joined text of them may collide."""
    pairs = [("a@b", "1"), ("a", "b@1"), ("a", "b@"), ("a@", "b"), ("", "a@b@1"), ("a@b@1", "")]
    stored = [await store.append(RUN, msg(i, r, content=f"{i}|{r}")) for i, r in pairs]
    expect_equal([m.seq for m in stored], [1, 2, 3, 4, 5, 6], "seq of pairs whose text collides")
    for (mid, rev), first in zip(pairs, stored, strict=True):
        again = await store.append(RUN, msg(mid, rev, content="again"))
        expect_equal(again, first, f"append of ({mid!r}, {rev!r}) again")
    claim = await store.claim(RUN, len(pairs))
    expect_equal(
        [(m.id, m.revision, m.content) for m in claim.messages],
        [(i, r, f"{i}|{r}") for i, r in pairs],
        "claimed messages",
    )


@CHECKS.rule("concurrent_appends_number_once")
async def concurrent_appends_number_once(store: Store) -> None:
    """Concurrent appends get distinct seqs 1..n; concurrent duplicates share one message."""
    sent = [msg(f"m{i}") for i in range(12)] + [msg(f"m{i}") for i in range(0, 12, 3)]
    stored = await asyncio.gather(*(store.append(RUN, m) for m in sent))
    seq_of: dict[str, set[int]] = {}
    for message in stored:
        seq_of.setdefault(message.id, set()).add(message.seq)
    expect(
        all(len(seqs) == 1 for seqs in seq_of.values()),
        f"duplicates got different seqs: {seq_of}",
    )
    expect_equal(
        sorted(s for seqs in seq_of.values() for s in seqs), list(range(1, 13)), "seqs given"
    )
    claim = await store.claim(RUN, 12)
    expect_equal(
        [(m.seq, m.id) for m in claim.messages],
        sorted((next(iter(seqs)), mid) for mid, seqs in seq_of.items()),
        "claimed messages in seq order",
    )


@CHECKS.rule("pending_reports_last_unconsumed_seq")
async def pending_reports_last_unconsumed_seq(store: Store) -> None:
    """``pending(after)`` is the last seq when it is above ``after`` and unconsumed, else 0."""
    expect_equal(await store.pending(RUN, 0), 0, "pending of an empty feed")
    await _fill(store, 3)
    for after, expected in ((0, 3), (2, 3), (3, 0), (7, 0)):
        expect_equal(await store.pending(RUN, after), expected, f"pending(after={after})")
    await store.claim(RUN, 2)
    expect_equal(await store.pending(RUN, 0), 3, "pending after a claim (claims consume nothing)")
    await store.consume(RUN, 3)
    expect_equal(await store.pending(RUN, 0), 0, "pending after consuming everything")
    await store.append(RUN, msg("m4"))
    expect_equal(await store.pending(RUN, 0), 4, "pending after new input")
    expect_equal(await store.pending(RUN, 4), 0, "pending(after=4)")


@CHECKS.rule("claim_returns_unconsumed_in_order")
async def claim_returns_unconsumed_in_order(store: Store) -> None:
    """``claim(through)`` returns the unconsumed messages up to ``through``, in order."""
    appended = await _fill(store, 5)
    claim = await store.claim(RUN, 3)
    expect_equal(claim.end_seq, 3, "end_seq of claim(3)")
    expect_equal(claim.messages, appended[:3], "messages of claim(3)")
    await store.consume(RUN, 2)
    claim = await store.claim(RUN, 4)
    expect_equal((claim.end_seq, claim.messages), (4, appended[2:4]), "claim(4) after consume(2)")


@CHECKS.rule("claim_is_idempotent")
async def claim_is_idempotent(store: Store) -> None:
    """Claiming the same boundary again returns the same claim, even after more input."""
    await _fill(store, 3)
    first = await store.claim(RUN, 2)
    await store.append(RUN, msg("m4"))
    expect_equal(await store.claim(RUN, 2), first, "claim(2) again after more input")
    expect_equal(await _claimed_ids(store, 4), ["m1", "m2", "m3", "m4"], "a wider claim")
    expect_equal(await store.claim(RUN, 2), first, "claim(2) after a wider claim")


@CHECKS.rule("claim_out_of_range_is_store_error")
async def claim_out_of_range_is_store_error(store: Store) -> None:
    """Claiming at or below the consumed boundary, or above the last seq, raises StoreError."""
    for through in (0, 1):
        with expect_raises(StoreError, f"claim({through}) of an empty feed"):
            await store.claim(RUN, through)
    await _fill(store, 3)
    with expect_raises(StoreError, "claim(4) with 3 messages"):
        await store.claim(RUN, 4)
    await store.consume(RUN, 2)
    for through in (0, 1, 2):
        with expect_raises(StoreError, f"claim({through}) after consume(2)"):
            await store.claim(RUN, through)
    expect_equal(await _claimed_ids(store, 3), ["m3"], "claim(3) after those errors")


@CHECKS.rule("consume_never_moves_backwards")
async def consume_never_moves_backwards(store: Store) -> None:
    """``consume`` below the consumed boundary changes nothing."""
    await _fill(store, 4)
    await store.consume(RUN, 3)
    await store.consume(RUN, 1)
    await store.consume(RUN, 3)
    expect_equal(await _claimed_ids(store, 4), ["m4"], "claim(4) after consume 3, 1, 3")
    with expect_raises(StoreError, "claim(3) after consume(3) then consume(1)"):
        await store.claim(RUN, 3)
    expect_equal(await store.pending(RUN, 0), 4, "pending after consume 3, 1, 3")


@CHECKS.rule("claim_after_consume_returns_later_messages")
async def claim_after_consume_returns_later_messages(store: Store) -> None:
    """After a claim is consumed, the next claim holds only input that came later."""
    await _fill(store, 2)
    expect_equal(await _claimed_ids(store, 2), ["m1", "m2"], "first claim")
    await store.consume(RUN, 2)
    await store.append(RUN, msg("m3"))
    await store.append(RUN, msg("m1"))  # a duplicate of consumed input is not new input
    expect_equal(await store.pending(RUN, 2), 3, "pending after new input")
    expect_equal(await _claimed_ids(store, 3), ["m3"], "claim after consume")


@CHECKS.rule("wait_pending_returns_pending_at_once")
async def wait_pending_returns_pending_at_once(store: Store) -> None:
    """``wait_pending`` returns at once when input is already pending."""
    await _fill(store, 2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    expect_equal(await store.wait_pending(RUN, 0, _WAIT), 2, "wait_pending with input there")
    expect_equal(await store.wait_pending(RUN, 1, _WAIT), 2, "wait_pending(after=1)")
    waited = loop.time() - started
    expect(waited < _PROMPT, f"wait_pending with input there took {waited:.1f} s")
    expect_equal(await store.wait_pending(RUN, 2, 0.0), 0, "wait_pending(after=2, max_wait=0)")


@CHECKS.rule("wait_pending_wakes_on_append")
async def wait_pending_wakes_on_append(store: Store) -> None:
    """A ``wait_pending`` under way returns soon after another task appends input."""
    await _fill(store, 1)
    await store.consume(RUN, 1)  # consumed input is not pending
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiter = asyncio.create_task(store.wait_pending(RUN, 0, _WAIT))
    try:
        await asyncio.sleep(0.05)  # let the waiter start waiting (either order is correct)
        if waiter.done():
            fail(f"wait_pending returned before any input came: {_outcome(waiter)}")
        await store.append("run-other", msg("x"))  # another run's input is not this run's
        appended = await store.append(RUN, msg("m2"))
        seq = await asyncio.wait_for(asyncio.shield(waiter), _WAIT + _PROMPT)
    finally:
        await _stop(waiter)
    waited = loop.time() - started
    expect_equal(seq, appended.seq, "what wait_pending returned")
    expect(waited < _PROMPT, f"wait_pending(max_wait={_WAIT}) took {waited:.1f} s to wake")


@CHECKS.rule("wait_pending_times_out_with_zero")
async def wait_pending_times_out_with_zero(store: Store) -> None:
    """Without new input, ``wait_pending`` returns 0 after about ``max_wait``, not early."""
    await _fill(store, 2)
    await store.consume(RUN, 2)
    max_wait = 0.3
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiter = asyncio.create_task(store.wait_pending(RUN, 0, max_wait))
    try:
        await asyncio.sleep(0.05)
        await store.append("run-other", msg("x"))  # wakes nobody waiting on this run
        seq = await asyncio.wait_for(asyncio.shield(waiter), max_wait + _PROMPT)
    finally:
        await _stop(waiter)
    waited = loop.time() - started
    expect_equal(seq, 0, "wait_pending without input")
    expect(waited >= max_wait / 2, f"wait_pending(max_wait={max_wait}) gave up after {waited} s")
    expect(waited < max_wait + _PROMPT, f"wait_pending(max_wait={max_wait}) took {waited:.1f} s")


async def _stop(task: asyncio.Task[int]) -> None:
    # Cancel a waiter the check gave up on, and let it finish, so it does not outlive the store.
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _outcome(task: asyncio.Task[int]) -> str:
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return f"raised {exc!r}" if exc is not None else f"returned {task.result()!r}"


FEED_ANSWERS = [0, 2, 0, 3, 0, 0]
"""What ``step_answers_what_the_feed_holds``'s steps are answered (``feed_answers``)."""


async def feed_answers(store: Store) -> list[int | None]:
    """Save steps around appends, claims and a consume; what each ``save_step`` returned.

    A store that tells the feed answers ``FEED_ANSWERS``: what ``pending(run, claimed_through)``
    returns right after each step (claimed_through of the step's checkpoint).
    """

    def claimed(steps: int, through: int, base: bool = False) -> Step:
        # Step ``steps`` appends one message where the log ends (as the loop's steps do), or
        # (``base``) rewrites the whole log: the stores' other way of writing a step.
        change = ContextChange(append=[user(f"s{steps}")], start=steps - 1)
        if base:
            change = ContextChange(base=[user(f"s{n}") for n in range(1, steps + 1)])
        return step(
            run=run_row(steps=steps),
            checkpoint=Checkpoint(context_length=steps, claimed_through=through),
            context=change,
        )

    out = [await store.save_step(RUN, claimed(1, 0))]  # nothing appended yet
    await store.append(RUN, msg("m1"))
    await store.append(RUN, msg("m2"))
    out.append(await store.save_step(RUN, claimed(2, 0)))  # m1 and m2 wait
    out.append(await store.save_step(RUN, claimed(3, 2)))  # both claimed
    await store.append(RUN, msg("m3"))
    out.append(await store.save_step(RUN, claimed(4, 2)))  # m3 waits
    await store.consume(RUN, 3)
    out.append(await store.save_step(RUN, claimed(5, 2)))  # consumed: nothing to claim
    out.append(await store.save_step(RUN, claimed(6, 3, base=True)))
    return out


@CHECKS.rule("step_answers_what_the_feed_holds")
async def step_answers_what_the_feed_holds(store: Store) -> None:
    """``save_step`` returns ``None`` or what ``pending`` returns for the step's claimed position.

    The runtime takes a step's answer instead of reading ``pending`` before the next model
    call, so a wrong number loses input (0 for waiting input) or claims what is not there.
    """
    answers = await feed_answers(store)
    for i, (got, want) in enumerate(zip(answers, FEED_ANSWERS, strict=True), 1):
        expect(got is None or got == want, f"save_step {i} answered {got!r}, not {want} or None")
