"""A process that resumes runs on command, to race another one (tests/claims).

Reads lines ``resume <run_id> <start_at>`` on stdin; at wall-clock ``start_at`` it resumes the
run with a fresh ``Runtime`` and prints ``<run_id> busy``, ``<run_id> <status>`` or
``<run_id> error <text>``. The approved tool appends ``<run_id>`` to the ledger file, fsynced.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import steadyrun as sr
from steadyrun._cli_target import open_store
from steadyrun.control import Confirm
from steadyrun.testing import ScriptedModel, text


def agent(ledger: str) -> sr.Agent:
    @sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Refund?"))
    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{order_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return f"refunded {order_id}"

    script = [text("done")] * 1000
    return sr.Agent(name="support", model=ScriptedModel(script), tools=[refund])


async def main(url: str, ledger: str) -> None:
    store = open_store(url, create=True)
    loop = asyncio.get_running_loop()
    print("ready", flush=True)
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        _, run_id, start_at = line.split()
        await asyncio.sleep(max(0.0, float(start_at) - time.time()))
        try:
            result = await sr.Runtime(store, agents=[agent(ledger)]).resume(run_id)
            print(run_id, result.status, flush=True)
        except sr.RunBusyError:
            print(run_id, "busy", flush=True)
        except Exception as exc:  # reported to the parent, which fails the test
            print(run_id, "error", repr(exc).replace("\n", " "), flush=True)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
