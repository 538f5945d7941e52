"""An LRU cache in front of an embedder, and batching to its limit."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.contracts.embedder import Embedder
from recallstack.core.errors import BackendError, EmbeddingRefusedError
from recallstack.core.runtime.calls import Steps, arun, call, run
from recallstack.core.vectors import Matrix


class CachedEmbedder:
    """Embeds texts through an LRU cache keyed by (model id, SHA-256 of the text).

    Misses are de-duplicated and sent in as few calls as the embedder's batch
    size allows; `calls` counts those calls. Refused inputs are not cached.
    """

    def __init__(self, embedder: Embedder, size: int = 4096) -> None:
        self.embedder = embedder
        self.size = size
        self.calls = 0
        self._cache: OrderedDict[tuple[str, bytes], Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def _key(self, text: str) -> tuple[str, bytes]:
        return (self.embedder.model_id, hashlib.sha256(text.encode()).digest())

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Vectors for the texts; raises `EmbeddingRefusedError` (positions in `texts`)
        when the embedder refused some, after caching the others."""
        return run(self._embed(texts), _Model(self.embedder))

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """`embed`, awaiting the embedder's `aembed`."""
        return await arun(self._embed(texts), _Model(_Awaited(self.embedder)))

    def _embed(self, texts: Sequence[str]) -> Steps[Matrix]:
        keys = [self._key(t) for t in texts]
        found: dict[tuple[str, bytes], Matrix] = {}
        with self._lock:
            for key in keys:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        refused: dict[tuple[str, bytes], str] = {}
        for batch in batched(missing, max(1, self.embedder.batch_size)):
            try:
                self.calls += 1
                vectors = self._checked(batch, (yield from call(Embedder.embed, batch)))
            except EmbeddingRefusedError as exc:
                vectors = self._checked(batch, exc.vectors)
                refused.update({self._key(batch[i]): why for i, why in exc.refused.items()})
            with self._lock:
                for text, vector in zip(batch, vectors, strict=True):
                    key = self._key(text)
                    found[key] = vector
                    if key not in refused:
                        self._cache[key] = vector
                    if len(self._cache) > self.size:
                        self._cache.popitem(last=False)
        if not keys:
            return np.empty((0, self.embedder.dimension), dtype=np.float32)
        matrix = np.stack([found[k] for k in keys])
        if refused:
            positions = {i: refused[k] for i, k in enumerate(keys) if k in refused}
            raise EmbeddingRefusedError(positions, matrix)
        return matrix

    def _checked(self, batch: list[str], vectors: Matrix) -> Matrix:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(batch), self.embedder.dimension):
            raise BackendError(
                f"embedder {self.embedder.model_id} returned shape {vectors.shape} "
                f"for {len(batch)} texts, expected dimension {self.embedder.dimension}"
            )
        return vectors


class _Model(NamedTuple):
    """What `_embed`'s calls reach (`core/runtime/calls.py`): the model, blocking or awaited."""

    embedder: Any


class _Awaited:
    """An embedder whose `embed` is its `aembed`, for `arun`."""

    def __init__(self, embedder: Embedder) -> None:
        self.embed = embedder.aembed
