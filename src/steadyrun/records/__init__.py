"""The persisted facts of a run: call records, blocks, steps, checkpoints, and merge rules."""

from steadyrun.records._call import (
    ACTIVE_STATUSES,
    SETTLED_STATUSES,
    CallCompletion,
    CallDecision,
    CallRecord,
    CallStatus,
    CallUpdate,
    Handover,
    InputRequest,
    is_settled,
    merge_call,
    overlay_external,
)
from steadyrun.records._history import StepCall, StepEnding, StepEntry
from steadyrun.records._step import (
    CHECKPOINT_FORMAT,
    Block,
    Checkpoint,
    ContextChange,
    RunRecord,
    RunSnapshot,
    RunStatus,
    Step,
)

__all__ = [
    "ACTIVE_STATUSES",
    "CHECKPOINT_FORMAT",
    "SETTLED_STATUSES",
    "Block",
    "CallCompletion",
    "CallDecision",
    "CallRecord",
    "CallStatus",
    "CallUpdate",
    "Checkpoint",
    "ContextChange",
    "Handover",
    "InputRequest",
    "RunRecord",
    "RunSnapshot",
    "RunStatus",
    "Step",
    "StepCall",
    "StepEnding",
    "StepEntry",
    "is_settled",
    "merge_call",
    "overlay_external",
]
