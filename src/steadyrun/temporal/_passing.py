"""A workflow instance that passes everything on to the SDK's, for wrappers to change a part.

The worker's runners (``AheadAwareRunner``, ``ContextFreeRunner``) wrap the sandbox's
instances; each overrides what it changes and keeps the rest of the instance protocol here.
"""

from __future__ import annotations

from typing import Any

from temporalio.worker import WorkflowInstance

__all__ = ["PassingInstance"]


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
