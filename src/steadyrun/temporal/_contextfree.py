"""Workflow instances that skip the sandbox round trip for a serialization context no one uses.

For every payload of an activation and of its completion, Temporal's worker asks the workflow
instance for the payload's serialization context; the sandbox answers by compiling and running
a statement inside the sandbox each time (tens of times per run). The context only reaches
converters and codecs that take one (``WithSerializationContext``); with none of them (no
payload codec: Temporal's converters and steadyrun's ``StepPayloadConverter`` ignore it),
every context gives the converter it started from, so answering ``None`` (the context-free
converter) encodes and decodes the very same bytes without entering the sandbox.
"""

from __future__ import annotations

from typing import Any

from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    WorkflowSerializationContext,
)

from steadyrun.temporal._passing import PassingInstance, PassingRunner

__all__ = ["ContextFreeRunner", "context_free"]


def context_free(converter: DataConverter) -> bool:
    """Whether no part of ``converter`` changes with a serialization context."""
    contexts = (
        WorkflowSerializationContext(namespace="default", workflow_id="w"),
        ActivitySerializationContext(
            namespace="default",
            workflow_id="w",
            workflow_type="t",
            activity_type="a",
            activity_task_queue="q",
            is_local=False,
            activity_id="1",
        ),
    )
    return all(converter.with_context(c) is converter for c in contexts)


class _Instance(PassingInstance):
    def get_serialization_context(self, command_info: Any) -> Any:
        return None  # the context-free converter: the same one (see the module)


class ContextFreeRunner(PassingRunner):
    """``inner``'s instances, answering ``None`` for a serialization context (see the module).

    Only for a worker whose data converter is ``context_free``.
    """

    instance = _Instance
