"""MemoryStore passes the store conformance suite; the suite names the rules broken stores break.

The pattern for any store: one parametrized test, one test per rule (ids are the check names).
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from steadyrun._codec import encode
from steadyrun._errors import CallNotFoundError, StoreError, UsageError
from steadyrun.records import CallRecord, CallUpdate, RunSnapshot, Step, overlay_external
from steadyrun.stores import Claim, MemoryStore, Store
from steadyrun.testing.conformance import (
    CHECKS,
    CheckSkipped,
    check_store,
    factory_from,
    run_check,
    select_checks,
)

memory = factory_from(MemoryStore)


@pytest.mark.parametrize("check", CHECKS)
async def test_memory_store_conformance(check: str) -> None:
    await run_check(check, memory)


async def test_check_store_passes_memory_store() -> None:
    report = await check_store(memory)
    assert report.ok, str(report)
    assert report.passed == list(CHECKS)
    assert report.failed == {} and report.skipped == {}
    assert str(report).startswith(f"store conformance: {len(CHECKS)} checks, {len(CHECKS)} passed")
    report.raise_for_failures()


def test_check_names_are_grouped_by_port_and_state_a_rule() -> None:
    names = list(CHECKS)
    assert len(names) == len(set(names)) >= 50
    ports = [name.split(".")[0] for name in names]
    order = ["journal", "feed", "index", "claims", "lifecycle", "history"]
    assert ports == sorted(ports, key=order.index)
    for name, check in CHECKS.items():
        assert check.name == name and name.startswith(f"{check.port}.")
        assert check.rule and not check.rule.endswith(":")


# -- broken stores ---------------------------------------------------------------------------


class OverwritingStore(MemoryStore):
    """save_call keeps the last write instead of merging it with ``merge_call``."""

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        stored = self._runs.get(run_id)
        if stored is None:
            raise StoreError(f"unknown run {run_id!r}")
        stored.calls[call.id] = encode(call)


class CheckThenWriteStore(MemoryStore):
    """update_call reads, yields, then writes what it read with the host's write applied."""

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        stored = await self.load_call(run_id, call_id)
        if stored is None:
            raise CallNotFoundError(run_id, call_id)
        await asyncio.sleep(0)  # another host's write lands here, unseen
        merged = overlay_external(stored, update)
        self._runs[run_id].calls[call_id] = encode(merged)
        return merged


async def test_report_names_the_answer_races_a_check_then_write_store_loses() -> None:
    report = await check_store(factory_from(CheckThenWriteStore))
    races = {f"journal.racing_{kind}_one_wins" for kind in ("decisions", "answers", "outcomes")}
    # Its update_call also forgets to wake the run: the claims rule says so.
    assert set(report.failed) == races | {"claims.host_writes_wake_the_run"}
    assert "ConflictError" in report.failed["journal.racing_decisions_one_wins"]


class ConsumingClaimStore(MemoryStore):
    """claim consumes what it returns, so claiming the same boundary again is not the same."""

    async def claim(self, run_id: str, through: int) -> Claim:
        claim = await super().claim(run_id, through)
        await self.consume(run_id, through)
        return claim


MERGE_RULES = {
    "journal.save_call_ignores_older_rev",
    "journal.settled_outcome_is_final",
    "journal.host_handover_is_kept",
    "journal.stored_decision_stays",
    "journal.host_input_response_is_kept",
    "journal.concurrent_save_calls_of_one_call",
    "journal.save_calls_race_with_steps",
}


async def test_report_names_the_merge_rules_an_overwriting_store_breaks() -> None:
    report = await check_store(factory_from(OverwritingStore))
    assert not report.ok
    # Its save_call skips the fence check as well as the merge.
    broken = MERGE_RULES | {"claims.fenced_writes_of_a_lost_claim_are_refused"}
    assert set(report.failed) == broken
    assert set(report.passed) == set(CHECKS) - broken
    assert "CallRecord differs in" in report.failed["journal.settled_outcome_is_final"]
    assert "Traceback" in report.tracebacks["journal.settled_outcome_is_final"]
    text = str(report)
    assert f"{len(broken)} failed" in text
    for name in broken:
        assert f"FAILED {name}: {CHECKS[name].rule}" in text
    with pytest.raises(AssertionError) as raised:
        report.raise_for_failures()
    message = str(raised.value)
    assert f"breaks {len(broken)} conformance rule(s)" in message
    assert all(name in message for name in broken)


async def test_report_names_the_feed_rules_a_consuming_claim_breaks() -> None:
    report = await check_store(factory_from(ConsumingClaimStore))
    assert "feed.claim_is_idempotent" in report.failed
    # The lifecycle checks read feeds through claim too: a claim that consumes changes them.
    assert all(name.startswith(("feed.", "lifecycle.")) for name in report.failed)
    # What the store raised is reported as is, with its type.
    assert report.failed["feed.claim_is_idempotent"].startswith("StoreError: claim through 2")


async def test_run_check_raises_the_violation_with_the_rule_as_a_note() -> None:
    with pytest.raises(AssertionError, match="a host-settled call after a newer") as raised:
        await run_check("journal.settled_outcome_is_final", factory_from(OverwritingStore))
    assert any("journal.settled_outcome_is_final" in note for note in raised.value.__notes__)


class HangingStore(MemoryStore):
    async def load(self, run_id: str) -> RunSnapshot | None:
        await asyncio.Event().wait()
        return None


async def test_a_check_that_hangs_fails_after_its_timeout() -> None:
    with pytest.raises(AssertionError, match="did not finish within 0.05 s"):
        await run_check(
            "journal.load_unknown_run_is_none", factory_from(HangingStore), time_limit=0.05
        )
    report = await check_store(factory_from(HangingStore), only=["journal.load_*"], time_limit=0.05)
    assert list(report.failed) == ["journal.load_unknown_run_is_none"]


# -- factories, ports and selection ----------------------------------------------------------


class JournalOnly:
    """A Journal without Feed or RunIndex: only the journal checks apply."""

    def __init__(self) -> None:
        self._store = MemoryStore()

    async def save_step(self, run_id: str, step: Step) -> None:
        await self._store.save_step(run_id, step)

    async def save_call(self, run_id: str, call: CallRecord) -> None:
        await self._store.save_call(run_id, call)

    async def update_call(self, run_id: str, call_id: str, update: CallUpdate) -> CallRecord:
        return await self._store.update_call(run_id, call_id, update)

    async def load(self, run_id: str) -> RunSnapshot | None:
        return await self._store.load(run_id)

    async def load_call(self, run_id: str, call_id: str) -> CallRecord | None:
        return await self._store.load_call(run_id, call_id)

    async def close(self) -> None:
        await self._store.close()


async def test_checks_of_missing_ports_are_skipped() -> None:
    journal_only = factory_from(JournalOnly)  # type: ignore[arg-type]
    report = await check_store(journal_only)
    assert report.ok
    assert report.passed == [n for n in CHECKS if n.startswith("journal.")]
    assert set(report.skipped) == {n for n in CHECKS if not n.startswith("journal.")}
    assert report.skipped["feed.claim_is_idempotent"] == "the store does not implement Feed"
    assert report.skipped["index.limit"] == "the store does not implement RunIndex"
    assert "SKIPPED (the store does not implement RunIndex): index." in str(report)
    with pytest.raises(CheckSkipped):
        await run_check("feed.claim_is_idempotent", journal_only)


async def test_only_and_skip_select_by_name_or_pattern() -> None:
    report = await check_store(memory, only=["feed.*", "index.limit"], skip=["feed.wait_*"])
    expected = [n for n in CHECKS if n.startswith("feed.") and not n.startswith("feed.wait_")]
    assert report.passed == [*expected, "index.limit"]
    assert report.skipped["feed.wait_pending_wakes_on_append"] == "left out by skip="
    assert report.skipped["journal.save_step_round_trip"] == "not selected by only="
    assert len(report.passed) + len(report.skipped) == len(CHECKS)
    assert select_checks(only="index.limit") == ["index.limit"]
    with pytest.raises(UsageError, match="did you mean index.limit"):
        select_checks(only=["index.limits"])
    with pytest.raises(UsageError, match="matches no conformance check"):
        await check_store(memory, skip=["nothing.*"])
    with pytest.raises(UsageError, match="no conformance check named"):
        await run_check("journal.nope", memory)


class ClosingStore(MemoryStore):
    closed: list[bool] = []

    async def close(self) -> None:
        self.closed.append(True)


async def test_factory_from_takes_async_makers_and_closes_every_store() -> None:
    async def make() -> Store:
        await asyncio.sleep(0)
        return ClosingStore()

    ClosingStore.closed = []
    await run_check("journal.load_unknown_run_is_none", factory_from(make))
    assert ClosingStore.closed == [True]

    class BrokenClosingStore(ClosingStore, OverwritingStore):
        pass

    report = await check_store(factory_from(BrokenClosingStore), only=["journal.*"])
    assert set(report.failed) == MERGE_RULES
    assert len(ClosingStore.closed) == 1 + len(report.passed) + len(report.failed)


async def test_a_store_factory_can_be_any_async_context_manager() -> None:
    made: list[MemoryStore] = []

    @asynccontextmanager
    async def factory() -> AsyncIterator[Store]:
        store = MemoryStore()
        made.append(store)
        yield store

    report = await check_store(factory, only=["index.*"])
    assert report.ok and len(made) == len(report.passed) == len(select_checks(only=["index.*"]))
    assert len({id(s) for s in made}) == len(made)  # a fresh store for every check
