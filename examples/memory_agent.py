"""An agent that remembers the user across conversations, in a SQLite memory bank.

The first conversation ends with an extraction call that stores what is worth remembering; the
second recalls it before the model answers. A fake model stands in for a provider's, so this
runs without an API key: ``python examples/memory_agent.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path

import steadyrun as sr
from steadyrun.extensions.memory import Memory, SqliteMemoryBank
from steadyrun.testing import FunctionModel, text, tool_calls


def fake_model(request: sr.ModelRequest) -> sr.ModelResponse:
    """Stands in for a real model: answers chat turns and the extraction's structured call."""
    if any(t.name == "final_result" for t in request.tools):  # the extraction call
        prompt = request.messages[0].text
        if "My dog is called Rex" in prompt and "Rex" not in prompt.split("Conversation:")[0]:
            found = [{"op": "add", "text": "The user's dog is called Rex"}]
        else:
            found = []
        return tool_calls(("final_result", {"changes": found}))
    recalled = re.search(r"\[mem\d+\] The user's dog is called (\w+)", request.instructions)
    if recalled:
        return text(f"Your dog is called {recalled.group(1)}.")
    return text("What a lovely name!")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # Keyword ranking here; pass embed=minilm_embedder() for embeddings.
        bank = SqliteMemoryBank(Path(tmp) / "memory.db")
        agent = sr.Agent(
            name="companion",
            instructions="You are a friendly assistant.",
            model=FunctionModel(fake_model),
            # One namespace per user: run ids look like "alice:<conversation>".
            extensions=[Memory(bank, namespace=lambda run_id: run_id.split(":")[0])],
        )
        store = sr.SqliteStore(Path(tmp) / "runs.db")
        runtime = sr.Runtime(store)

        first = await runtime.run(agent, run_id="alice:1", input="My dog is called Rex.")
        print(f"conversation 1: {first.text}")
        for memory in await bank.list("alice"):
            print(f"remembered: {memory.text}")

        second = await runtime.run(agent, run_id="alice:2", input="What is my dog called?")
        second.raise_for_status()
        print(f"conversation 2: {second.text}")
        print(f"usage: {json.dumps({'requests': second.usage.requests})}")
        await store.close()
        await bank.close()


if __name__ == "__main__":
    asyncio.run(main())
