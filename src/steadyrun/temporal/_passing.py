"""A workflow runner and instance passing everything on to the SDK's: wrappers change a part.

The worker's runners (``AheadAwareRunner``, ``ContextFreeRunner``) wrap the sandbox's
instances; each overrides what it changes and keeps the rest of the instance protocol here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

__all__ = ["PassingInstance", "PassingRunner"]


class PassingInstance(WorkflowInstance):
    """``inner``'s behaviour, every method of the instance protocol passed on."""

    def __init__(self, inner: WorkflowInstance) -> None:
        self._inner = inner

    def activate(self, act: Any) -> Any:
        return self._inner.activate(act)

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Any:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        # The worker interrupts a deadlocked workflow's thread by this id.
        return self._inner.get_thread_id()

    def __getattr__(self, name: str) -> Any:
        # Anything else the worker asks of an instance (the SDK's own, unlisted) passes on.
        if name == "_inner":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)


class PassingRunner(WorkflowRunner):
    """``inner``'s instances, each wrapped in ``instance``; the rest passed on to ``inner``."""

    instance: ClassVar[type[PassingInstance]] = PassingInstance

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: Any) -> None:
        """Prepared by ``inner``."""
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        """``inner``'s instance, wrapped."""
        return self.instance(self.inner.create_instance(det))

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        """Passed to ``inner``."""
        self.inner.set_worker_level_failure_exception_types(types)
