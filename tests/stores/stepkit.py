"""Steps for the SQLite writer's tests: a run's first step, one user message long.

``test_sqlite_writer_open.py``, ``test_sqlite_checkpoint_processes.py`` and the child process
of the latter (which puts this folder on its path) save them.
"""

from __future__ import annotations

from steadyrun.chat import Message, TextPart
from steadyrun.records import Checkpoint, ContextChange, RunRecord, Step


def first_step(run_id: str, text: str) -> Step:
    """The first step of run ``run_id``: its context is one user message saying ``text``."""
    hello = Message(role="user", parts=[TextPart(text=text)])
    return Step(
        run=RunRecord(run_id=run_id, agent="a", steps=1),
        checkpoint=Checkpoint(context_length=1),
        context=ContextChange(append=[hello], start=0),
    )
