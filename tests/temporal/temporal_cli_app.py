"""The ``--app`` of the Temporal CLI tests: an ``App`` on a ``TemporalEngine`` (no worker here).

The test process runs the Temporal worker (``cli_agents`` on the same SQLite file and task
queue); the ``steadyrun`` commands load this module, start and reach runs through the engine,
and read them from the store, as a user's app on Temporal is used from the command line.
"""

from __future__ import annotations

import os
from pathlib import Path

from temporal_parity_kit import Deps, parity_agents

import steadyrun as sr
from steadyrun.chat import ModelRequest, ModelResponse
from steadyrun.service import App
from steadyrun.temporal import TemporalEngine
from steadyrun.testing import FunctionModel, text

MENDED_ENV = "CLI_MENDED"
"""A file whose presence mends the ``moody`` agent's model."""


class ModelDown(Exception):
    """The model is down (not worth retrying: the run fails)."""

    retryable = False


def moody_model(mended: Path) -> FunctionModel:
    """Down until the ``mended`` file exists, then answers."""

    def respond(request: ModelRequest) -> ModelResponse:
        if not mended.exists():
            raise ModelDown("the model is down")
        return text("up again")

    return FunctionModel(respond)


def cli_agents(effects: Path, mended: Path) -> list[sr.Agent]:
    """The parity agents, and ``moody`` (its model fails until ``mended`` exists)."""
    return [
        *parity_agents(Deps(effects=effects)),
        sr.Agent(name="moody", model=moody_model(mended)),
    ]


def _app() -> App:
    db = Path(os.environ["CLI_DB"])
    engine = TemporalEngine(
        os.environ["STEADYRUN_TEMPORAL_ADDRESS"], task_queue=os.environ["STEADYRUN_TASK_QUEUE"]
    )
    agents = cli_agents(db.with_name("cli-effects"), Path(os.environ[MENDED_ENV]))
    return App(sr.SqliteStore(db), agents=agents, engine=engine, worker=False)


app = _app
