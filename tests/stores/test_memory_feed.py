"""MemoryStore as a Feed: numbering, deduplication, pending, claim and consume."""

import asyncio
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyrun._errors import StoreError
from steadyrun.chat import MediaRef
from steadyrun.stores import Feed, FeedMessage, MemoryStore

RUN = "run-1"


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def test_memory_store_is_a_feed(store: MemoryStore) -> None:
    assert isinstance(store, Feed)


def msg(mid: str, revision: str = "1", content: str = "") -> FeedMessage:
    return FeedMessage(id=mid, revision=revision, content=content or f"text of {mid}")


async def fill(store: MemoryStore, n: int) -> list[FeedMessage]:
    return [await store.append(RUN, msg(f"m{i}")) for i in range(1, n + 1)]


async def test_append_numbers_from_one(store: MemoryStore) -> None:
    appended = await fill(store, 4)
    assert [m.seq for m in appended] == [1, 2, 3, 4]
    assert appended[0] == replace(msg("m1"), seq=1)
    other = await store.append("run-2", msg("m1"))
    assert other.seq == 1


async def test_append_keeps_media_and_meta(store: MemoryStore) -> None:
    ref = MediaRef(key="k", mime="image/png", size=4, sha256="ff")
    sent = FeedMessage(id="m1", role="system", content="c", media=[ref], meta={"a": "b"})
    stored = await store.append(RUN, sent)
    claim = await store.claim(RUN, 1)
    assert claim.messages == [stored] == [replace(sent, seq=1)]


async def test_duplicate_id_and_revision_returns_the_existing_message(store: MemoryStore) -> None:
    await fill(store, 2)
    again = await store.append(RUN, msg("m1", content="different text"))
    assert again == replace(msg("m1"), seq=1)
    assert await store.pending(RUN, 0) == 2


async def test_a_new_revision_is_new_input(store: MemoryStore) -> None:
    await fill(store, 2)
    revised = await store.append(RUN, msg("m1", revision="2", content="edited"))
    assert revised.seq == 3
    assert (await store.append(RUN, msg("m1", revision="2"))).seq == 3
    claim = await store.claim(RUN, 3)
    assert [(m.id, m.revision, m.content) for m in claim.messages] == [
        ("m1", "1", "text of m1"),
        ("m2", "1", "text of m2"),
        ("m1", "2", "edited"),
    ]


async def test_pending(store: MemoryStore) -> None:
    assert await store.pending(RUN, 0) == 0
    await fill(store, 3)
    assert await store.pending(RUN, 0) == 3
    assert await store.pending(RUN, 2) == 3
    assert await store.pending(RUN, 3) == 0
    assert await store.pending(RUN, 7) == 0
    await store.consume(RUN, 3)
    assert await store.pending(RUN, 0) == 0
    await store.append(RUN, msg("m4"))
    assert await store.pending(RUN, 0) == 4
    assert await store.pending(RUN, 4) == 0


async def test_claim_is_idempotent_at_the_same_boundary(store: MemoryStore) -> None:
    await fill(store, 3)
    first = await store.claim(RUN, 2)
    await store.append(RUN, msg("m4"))
    second = await store.claim(RUN, 2)
    assert first == second
    assert first.end_seq == 2
    assert [m.id for m in first.messages] == ["m1", "m2"]


async def test_claim_out_of_range_is_a_store_error(store: MemoryStore) -> None:
    with pytest.raises(StoreError):
        await store.claim(RUN, 1)  # nothing appended
    with pytest.raises(StoreError):
        await store.claim(RUN, 0)
    await fill(store, 3)
    with pytest.raises(StoreError):
        await store.claim(RUN, 4)
    await store.consume(RUN, 2)
    for through in (0, 1, 2):
        with pytest.raises(StoreError):
            await store.claim(RUN, through)


async def test_claim_returns_only_unconsumed_messages(store: MemoryStore) -> None:
    await fill(store, 5)
    await store.consume(RUN, 2)
    claim = await store.claim(RUN, 4)
    assert claim.end_seq == 4
    assert [m.seq for m in claim.messages] == [3, 4]


async def test_consume_never_moves_backwards(store: MemoryStore) -> None:
    await fill(store, 4)
    await store.consume(RUN, 3)
    await store.consume(RUN, 1)
    await store.consume(RUN, 3)
    assert [m.seq for m in (await store.claim(RUN, 4)).messages] == [4]
    with pytest.raises(StoreError):
        await store.claim(RUN, 3)


async def test_consume_beyond_the_last_message_stops_at_it(store: MemoryStore) -> None:
    await fill(store, 2)
    await store.consume(RUN, 10)
    assert await store.pending(RUN, 0) == 0
    await store.append(RUN, msg("m3"))
    assert [m.id for m in (await store.claim(RUN, 3)).messages] == ["m3"]


keys = st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]))


@given(st.lists(keys, max_size=20))
def test_appends_number_each_new_key_once_in_order(sent: list[tuple[str, str]]) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        first_seq: dict[tuple[str, str], int] = {}
        for mid, revision in sent:
            stored = await store.append(RUN, msg(mid, revision))
            expected = first_seq.setdefault((mid, revision), len(first_seq) + 1)
            assert stored.seq == expected
        assert await store.pending(RUN, 0) == len(first_seq)
        if first_seq:
            claim = await store.claim(RUN, len(first_seq))
            assert [(m.id, m.revision) for m in claim.messages] == list(first_seq)
            assert [m.seq for m in claim.messages] == list(range(1, len(first_seq) + 1))

    asyncio.run(scenario())
