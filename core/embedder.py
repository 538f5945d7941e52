"""The embedder contract: text in, float32 vectors out, with a model id and a size."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

from recallstack.core.scores import Matrix


class Embedder(ABC):
    """Turns texts into vectors. `max_input` is in words; `batch_size` texts per call."""

    model_id: str
    dimension: int
    max_input: int = 256
    batch_size: int = 64

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts; returns a float32 array of shape (len(texts), dimension)."""

    def close(self) -> None:
        """Release resources; the default has none."""


def index_name(model_id: str, dimension: int) -> str:
    """The logical index name for an embedder: `memory_messages_<model>_<dimension>`.

    Every read and write path derives the name here, so that vectors of two
    models (or two sizes of one model) never share an index.
    """
    slug = re.sub(r"[^a-z0-9]+", "_", model_id.lower())
    return f"memory_messages_{slug}_{dimension}"
