"""Two processes resume one approved run at the same moment: the body runs exactly once.

The acceptance check of one executor per run across processes, 100 trials on SQLite and 100
on PostgreSQL. Each trial makes a run suspended on an approval, approves it, and tells two
long-lived child processes to resume it at the same wall-clock instant. One of them executes
it; the other gets ``RunBusyError`` or finds it already done. The ledger the tool appends to
shows the effect once, and the journal holds one record of the call.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pgkit
import steadyrun as sr
from steadyrun._cli_target import open_store
from steadyrun.control import Confirm
from steadyrun.testing import ScriptedModel, text, tool_calls

TRIALS = 100
CHILD = Path(__file__).with_name("resume_child.py")

pg_dsn = pgkit.database_fixture()


def _suspending_agent(order: str) -> sr.Agent:
    @sr.tool(side_effects=True, policy=lambda call: Confirm(prompt="Refund?"))
    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: The order.
        """
        raise AssertionError("approved bodies run in the children only")

    return sr.Agent(
        name="support",
        model=ScriptedModel([tool_calls(("refund", {"order_id": order})), text("done")]),
        tools=[refund],
    )


class Child:
    def __init__(self, url: str, ledger: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), url, str(ledger)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.read() == "ready"

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _children(url: str, ledger: Path) -> Iterator[tuple[Child, Child]]:
    pair = (Child(url, ledger), Child(url, ledger))
    try:
        yield pair
    finally:
        for child in pair:
            child.close()


async def _race(url: str, tmp_path: Path, label: str) -> None:
    ledger = tmp_path / "ledger.txt"
    store = open_store(url, create=True)
    outcomes: dict[str, int] = {}
    try:
        for pair in _children(url, ledger):
            for trial in range(TRIALS):
                run_id = f"race-{trial}"
                result = await sr.Runtime(store).run(
                    _suspending_agent(run_id), run_id=run_id, input="refund"
                )
                assert result.status == "suspended"
                await sr.Runtime(store).decide(run_id, result.calls[0].id, approve=True)
                start = time.time() + 0.05
                for child in pair:
                    child.send(f"resume {run_id} {start}")
                answers = sorted(child.read() for child in pair)
                assert not any(" error " in a for a in answers), answers
                kinds = sorted(a.split()[1] for a in answers)
                assert kinds in (["busy", "completed"], ["completed", "completed"]), answers
                outcomes[" ".join(kinds)] = outcomes.get(" ".join(kinds), 0) + 1
                snap = await store.load(run_id)
                assert snap is not None and snap.run.status == "completed"
                assert [c.status for c in snap.calls] == ["succeeded"]
        lines = ledger.read_text().split()
        assert sorted(lines) == sorted(f"race-{t}" for t in range(TRIALS))  # once each
        print(f"\n{label}: {TRIALS} trials, outcomes {outcomes}")
    finally:
        await store.close()


async def test_two_processes_resume_one_run_on_sqlite(tmp_path: Path) -> None:
    await _race(f"sqlite:{tmp_path / 'runs.db'}", tmp_path, "SQLite")


async def test_two_processes_resume_one_run_on_postgres(pg_dsn: str, tmp_path: Path) -> None:
    await _race(pg_dsn, tmp_path, "PostgreSQL")
