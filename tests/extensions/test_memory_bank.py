"""Memory banks: the port's contract on every implementation, SQLite files, and ranking."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import steadyrun as sr
from steadyrun.extensions._memory_rank import (
    bm25_rank,
    cosine,
    from_blob,
    similarity_rank,
    to_blob,
    tokenize,
)
from steadyrun.extensions.memory import (
    InMemoryMemoryBank,
    MemoryBank,
    SqliteMemoryBank,
)
from steadyrun.testing import ScriptedModel, text


def toy_embed(texts: list[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedding: each token adds to one of 32 buckets."""
    out = []
    for item in texts:
        vec = [0.0] * 32
        for token in tokenize(item):
            vec[zlib.crc32(token.encode()) % 32] += 1.0
        out.append(vec)
    return out


async def async_toy_embed(texts: list[str]) -> list[list[float]]:
    return toy_embed(texts)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


KINDS = ["fake", "sqlite", "fake-embed", "sqlite-embed", "sqlite-async-embed"]


@pytest.fixture(params=KINDS)
async def bank(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryBank]:
    kind: str = request.param
    embed: Any = None
    if kind.endswith("async-embed"):
        embed = async_toy_embed
    elif kind.endswith("embed"):
        embed = toy_embed
    if kind.startswith("fake"):
        yield InMemoryMemoryBank(embed, clock=Clock())
        return
    b = SqliteMemoryBank(tmp_path / "memory.db", embed, clock=Clock())
    yield b
    await b.close()


# -- the contract --------------------------------------------------------------------------------


async def test_a_memory_is_added_read_listed_updated_and_deleted(bank: MemoryBank) -> None:
    assert isinstance(bank, MemoryBank)
    first = await bank.add("u1", "  The user's dog is called Rex  ", metadata={"run_id": "r1"})
    second = await bank.add("u1", "The user lives in Lisbon")
    assert (first.id, second.id) == ("mem1", "mem2")
    assert first.text == "The user's dog is called Rex"
    assert first.metadata == {"run_id": "r1"} and second.metadata == {}
    assert first.created_at == first.updated_at
    assert await bank.get("u1", "mem1") == first
    assert [m.id for m in await bank.list("u1")] == ["mem1", "mem2"]

    changed = await bank.update("u1", "mem1", "The user's dog Rex died last year")
    assert changed.id == "mem1" and changed.created_at == first.created_at
    assert changed.updated_at > first.updated_at
    assert changed.metadata == {"run_id": "r1"}  # kept unless given
    assert (await bank.get("u1", "mem1")) == changed
    again = await bank.update("u1", "mem1", "Rex", metadata={"k": [1, 2]})
    assert again.metadata == {"k": [1, 2]}

    assert await bank.delete("u1", "mem1") is True
    assert await bank.delete("u1", "mem1") is False
    assert await bank.get("u1", "mem1") is None
    assert [m.id for m in await bank.list("u1")] == ["mem2"]
    third = await bank.add("u1", "The user is vegetarian")
    assert third.id == "mem3"  # ids are never reused


async def test_namespaces_are_separate(bank: MemoryBank) -> None:
    mine = await bank.add("alice", "Alice likes tea")
    await bank.add("bob", "Bob likes tea")
    assert [m.text for m in await bank.list("alice")] == ["Alice likes tea"]
    assert await bank.get("bob", mine.id) is None
    assert await bank.delete("bob", mine.id) is False
    with pytest.raises(KeyError):
        await bank.update("bob", mine.id, "changed")
    assert [s.item.text for s in await bank.search("bob", "tea")] == ["Bob likes tea"]
    assert await bank.list("carol") == []
    assert await bank.search("carol", "tea") == []


async def test_unknown_ids_and_blank_texts_are_refused(bank: MemoryBank) -> None:
    with pytest.raises(KeyError):
        await bank.update("u", "mem42", "x")
    with pytest.raises(KeyError):
        await bank.update("u", "not-an-id", "x")
    assert await bank.get("u", "not-an-id") is None
    assert await bank.delete("u", "mem0") is False
    with pytest.raises(ValueError):
        await bank.add("u", "   ")
    with pytest.raises(sr.UsageError):
        await bank.search("u", "x", -1)


async def test_search_finds_the_relevant_memories_best_first(bank: MemoryBank) -> None:
    await bank.add("u", "The user's favourite colour is green")
    await bank.add("u", "The user's dog is called Rex")
    await bank.add("u", "The user works as a nurse in Porto")
    await bank.add("u", "The dog Rex is afraid of thunder")
    found = await bank.search("u", "what is my dog called?", limit=2)
    assert len(found) == 2
    assert {s.item.id for s in found} == {"mem2", "mem4"}
    assert found[0].score >= found[1].score
    assert await bank.search("u", "dog", limit=0) == []
    # The same search gives the same order.
    assert await bank.search("u", "what is my dog called?", limit=2) == found


async def test_keyword_search_leaves_out_memories_without_a_shared_term(tmp_path: Path) -> None:
    for b in (InMemoryMemoryBank(), SqliteMemoryBank(tmp_path / "m.db")):
        await b.add("u", "The user's dog is called Rex")
        await b.add("u", "The user likes jazz")
        found = await b.search("u", "tell me about the dog")
        assert [s.item.text for s in found] == ["The user's dog is called Rex"]
        assert await b.search("u", "spaceships") == []
        if isinstance(b, SqliteMemoryBank):
            await b.close()


# -- SQLite files --------------------------------------------------------------------------------


async def test_memories_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with SqliteMemoryBank(path) as b:
        await b.add("u", "The user's dog is called Rex", metadata={"source": "chat"})
        await b.add("u", "The user likes jazz")
        await b.delete("u", "mem2")
    async with SqliteMemoryBank(path) as b:
        items = await b.list("u")
        assert [(m.id, m.text, m.metadata) for m in items] == [
            ("mem1", "The user's dog is called Rex", {"source": "chat"})
        ]
        assert (await b.add("u", "x")).id == "mem3"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


async def test_a_file_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with SqliteMemoryBank(path) as b:
        await b.add("u", "x")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE steadyrun_memory_meta SET value = 99 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    async with SqliteMemoryBank(path) as b:
        with pytest.raises(sr.FormatVersionError) as info:
            await b.list("u")
    assert info.value.found == 99 and info.value.known == 1


async def test_a_bank_shares_a_file_with_a_run_store(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    store = sr.SqliteStore(path)
    model = ScriptedModel([text("hi")])
    await sr.Runtime(store).run(sr.Agent(name="a", model=model), run_id="r", input="hello")
    async with SqliteMemoryBank(path) as b:
        await b.add("u", "The user says hello a lot")
        assert len(await b.list("u")) == 1
    await store.close()
    store = sr.SqliteStore(path)
    assert (await store.load("r")) is not None  # the store's own schema version is untouched
    await store.close()


def _models(path: Path) -> list[str | None]:
    conn = sqlite3.connect(path)
    rows = [r[0] for r in conn.execute("SELECT embed_model FROM memory_items ORDER BY seq")]
    conn.close()
    return rows


async def test_a_changed_embedder_re_embeds_or_refuses(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with SqliteMemoryBank(path) as b:  # keyword bank: no vectors
        await b.add("u", "The user's dog is called Rex")
    async with SqliteMemoryBank(path, toy_embed, embed_name="toy-1") as b:
        await b.add("u", "The user likes jazz")
        assert _models(path) == [None, "toy-1"]
        found = await b.search("u", "dog Rex")
        assert found[0].item.id == "mem1"
        assert _models(path) == ["toy-1", "toy-1"]  # embedded when first searched

    calls: list[list[str]] = []

    def other(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [v + [1.0] for v in toy_embed(texts)]  # another model: another dimension

    async with SqliteMemoryBank(path, other, embed_name="toy-2", on_embedder_change="refuse") as b:
        with pytest.raises(sr.StoreError, match="embedded by toy-1, not 'toy-2'"):
            await b.search("u", "dog")
        assert await b.reembed("u") == 2
        assert _models(path) == ["toy-2", "toy-2"]
        found = await b.search("u", "dog Rex")
        assert found[0].item.id == "mem1"
    async with SqliteMemoryBank(path, other, embed_name="toy-2") as b:
        calls.clear()
        await b.search("u", "jazz")
        assert calls == [["jazz"]]  # nothing stale: only the query is embedded
    blob = to_blob([0.5, -1.25, 3.0])
    assert len(blob) == 12 and from_blob(blob) == [0.5, -1.25, 3.0]


def test_a_bad_embedder_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(sr.UsageError):
        SqliteMemoryBank(tmp_path / "m.db", on_embedder_change="maybe")  # type: ignore[arg-type]


async def test_an_embedder_returning_the_wrong_count_is_reported() -> None:
    bank = InMemoryMemoryBank(lambda texts: [])
    with pytest.raises(sr.UsageError, match="0 vectors for 1 texts"):
        await bank.add("u", "x")


# -- ranking -------------------------------------------------------------------------------------

VOCABULARY = "dog cat rex lisbon porto jazz tea coffee nurse green blue red the my is a of"
words = st.sampled_from(VOCABULARY.split())
phrases = st.lists(words, min_size=0, max_size=8).map(" ".join)
corpora = st.lists(phrases, min_size=1, max_size=8)


@given(corpora, phrases)
@settings(max_examples=200, deadline=None)
def test_bm25_scores_are_non_negative_and_ordered_deterministically(
    docs: list[str], query: str
) -> None:
    pairs = [(f"d{i}", t) for i, t in enumerate(docs)]
    ranked = bm25_rank(query, pairs)
    assert sorted(d for d, _ in ranked) == sorted(d for d, _ in pairs)
    assert all(score >= 0 for _, score in ranked)
    assert ranked == sorted(ranked, key=lambda p: (-p[1], p[0]))  # ties by id
    assert bm25_rank(query, list(reversed(pairs))) == ranked  # input order does not matter


@given(corpora, st.data())
@settings(max_examples=200, deadline=None)
def test_an_exact_match_ranks_first(docs: list[str], data: st.DataObject) -> None:
    query = data.draw(st.sampled_from(docs))
    assume(tokenize(query))
    ranked = bm25_rank(query, [(f"d{i}", t) for i, t in enumerate(docs)])
    top = docs[int(ranked[0][0][1:])]
    assert tokenize(top) == tokenize(query)


def test_bm25_prefers_rare_terms_and_ignores_stopwords() -> None:
    docs = [("a", "the user the user the user"), ("b", "the user's dog"), ("c", "nothing here")]
    ranked = bm25_rank("the dog of the user", docs)
    assert ranked[0][0] == "b"
    assert dict(ranked)["c"] == 0.0
    assert tokenize("The Dogs' and my DOG's") == ["dog", "dog"]
    assert bm25_rank("anything", []) == []


@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=6))
def test_cosine_of_a_vector_with_itself_is_one(vec: list[float]) -> None:
    assume(any(abs(x) > 1e-3 for x in vec))
    assert cosine(vec, vec) == pytest.approx(1.0)
    assert cosine(vec, [-x for x in vec]) == pytest.approx(-1.0)
    assert cosine(vec, [0.0] * len(vec)) == 0.0


def test_similarity_ranking_breaks_ties_by_id() -> None:
    vecs: list[tuple[str, list[float]]] = [("b", [1.0, 0.0]), ("a", [2.0, 0.0]), ("c", [0.0, 1.0])]
    assert similarity_rank([1.0, 0.0], vecs) == [("a", 1.0), ("b", 1.0), ("c", 0.0)]
    with pytest.raises(ValueError):
        cosine([1.0], [1.0, 2.0])
