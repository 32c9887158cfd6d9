"""Scripts that are not modules of a package (benchmarks, data generators), loaded for tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_script"]


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path`` as a module called ``name`` (registered in ``sys.modules``).

    Registered before it runs, so the dataclasses and TypedDicts it defines can find their
    module by name.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
