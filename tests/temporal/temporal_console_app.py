"""The app ``steadyrun serve --engine temporal`` serves in the Temporal console test.

The parity agents on a SQLite store (``SERVE_DB``), their effects written to ``SERVE_EFFECTS``;
the engine comes from the command line, so the CLI loads the very same app.
"""

from __future__ import annotations

import os
from pathlib import Path

from temporal_parity_kit import Deps, parity_agents

import steadyrun as sr
from steadyrun.service import App

app = App(
    sr.SqliteStore(os.environ["SERVE_DB"]),
    agents=parity_agents(Deps(effects=Path(os.environ["SERVE_EFFECTS"]))),
)
