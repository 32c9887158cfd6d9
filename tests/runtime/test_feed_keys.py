"""Input is told apart by the pair (id, revision): no joined text of the two may collide.

Before, ``f"{id}@{revision}"`` made ``("a", "b@1")`` a duplicate of ``("a@b", "1")``, and the
second message was silently dropped by the store and by the run's own dedup.
"""

from __future__ import annotations

import pytest

import steadyrun as sr
from steadyrun.chat import Message, TextPart
from steadyrun.stores import FeedMessage
from steadyrun.testing import ScriptedModel, text

PAIRS = [("a@b", "1"), ("a", "b@1"), ("a\\", "@b@1"), ("a\\@b", "1")]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_messages_whose_joined_ids_collide_all_reach_the_model(
    kind: str, tmp_path: object
) -> None:
    store = sr.MemoryStore() if kind == "memory" else sr.SqliteStore(f"{tmp_path}/runs.db")
    model = ScriptedModel([text("ok")])
    runtime = sr.Runtime(store)
    try:
        for mid, rev in PAIRS[:-1]:
            await runtime.send("r", f"{mid}|{rev}", id=mid, revision=rev)
            await runtime.send("r", "a repeat", id=mid, revision=rev)  # still a duplicate
        mid, rev = PAIRS[-1]
        last = Message(role="user", parts=[TextPart(text=f"{mid}|{rev}")], id=mid, revision=rev)
        result = await runtime.run(sr.Agent(name="chat", model=model), run_id="r", input=last)
        assert result.status == "completed"
        said = [m.text for m in model.requests[0].messages if m.role == "user"]
        assert said == [f"{mid}|{rev}" for mid, rev in PAIRS]
    finally:
        await store.close()


def test_the_key_is_the_old_text_for_ids_without_at_or_backslash() -> None:
    # Checkpoints written before keep meaning the same messages.
    assert FeedMessage(id="u1", revision="2", content="x").key == "u1@2"
    keys = {FeedMessage(id=i, revision=r, content="x").key for i, r in PAIRS}
    assert len(keys) == len(PAIRS)
