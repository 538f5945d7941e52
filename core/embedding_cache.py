"""An LRU cache in front of an embedder, and batching to its limit."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from recallstack.core.embedder import Embedder
from recallstack.core.errors import BackendError
from recallstack.core.scores import Matrix


class CachedEmbedder:
    """Embeds texts through an LRU cache keyed by (model id, SHA-256 of the text).

    Misses are de-duplicated and sent in as few calls as the embedder's batch
    size allows; `calls` counts those calls.
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
        keys = [self._key(t) for t in texts]
        found: dict[tuple[str, bytes], Matrix] = {}
        with self._lock:
            for key in keys:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        step = max(1, self.embedder.batch_size)
        for start in range(0, len(missing), step):
            batch = missing[start : start + step]
            vectors = np.asarray(self.embedder.embed(batch), dtype=np.float32)
            self.calls += 1
            if vectors.shape != (len(batch), self.embedder.dimension):
                raise BackendError(
                    f"embedder {self.embedder.model_id} returned shape {vectors.shape} "
                    f"for {len(batch)} texts, expected dimension {self.embedder.dimension}"
                )
            with self._lock:
                for text, vector in zip(batch, vectors, strict=True):
                    key = self._key(text)
                    found[key] = vector
                    self._cache[key] = vector
                    if len(self._cache) > self.size:
                        self._cache.popitem(last=False)
        if not keys:
            return np.empty((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys])
