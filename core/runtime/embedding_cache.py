"""An LRU cache in front of an embedder, and batching to its limit."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import cast

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.contracts.embedder import Embedder, Tokenized
from recallstack.core.errors import BackendError, EmbeddingRefusedError
from recallstack.core.runtime.awaiting import await_only, in_asyncio
from recallstack.core.runtime.tracing import note, span
from recallstack.core.vectors import Matrix


class CachedEmbedder:
    """Embeds texts through an LRU cache keyed by (model id, SHA-256 of the text).

    Misses are de-duplicated and sent in as few calls as the embedder's batch
    size allows; `calls` counts those calls. Refused inputs are not cached.
    """

    def __init__(self, embedder: Embedder, size: int = 4096, *, awaited: bool = False) -> None:
        self.embedder = embedder
        self.size = size
        self.awaited = awaited
        """Whether the model's `aembed` is awaited under `greenlet_spawn` (`AsyncMemory`'s
        cache); a blocking memory's never asks where it runs."""
        self.calls = 0
        self._cache: OrderedDict[tuple[str, bytes], Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def _key(self, text: str) -> tuple[str, bytes]:
        return (self.embedder.model_id, hashlib.sha256(text.encode()).digest())

    def embed(self, inputs: Sequence[str | Tokenized]) -> Matrix:
        """Vectors for the inputs; raises `EmbeddingRefusedError` (positions in `inputs`)
        when the embedder refused some, after caching the others. Inputs chunking
        tokenized already (`Tokenized`) are embedded without tokenizing them again.

        On the event loop (`AsyncMemory`'s cache, core/runtime/awaiting.py) the
        model's `aembed` is awaited instead, so that the loop goes on while it works."""
        with span("embed", texts=len(inputs), model=self.embedder.model_id) as current:
            keys = [self._key(i if isinstance(i, str) else i.text) for i in inputs]
            found: dict[tuple[str, bytes], Matrix] = {}
            with self._lock:
                for key in keys:
                    if key in self._cache:
                        self._cache.move_to_end(key)
                        found[key] = self._cache[key]
            note(current, cached=len(found))
            return self._embed(inputs, keys, found)

    def _embed(
        self,
        inputs: Sequence[str | Tokenized],
        keys: list[tuple[str, bytes]],
        found: dict[tuple[str, bytes], Matrix],
    ) -> Matrix:
        """`embed` past the cache: the model's vectors for the inputs not found in it."""
        missing = {k: i for k, i in zip(keys, inputs, strict=True) if k not in found}
        tokenized = all(isinstance(i, Tokenized) for i in missing.values())
        refused: dict[tuple[str, bytes], str] = {}
        for batch in batched(list(missing), max(1, self.embedder.batch_size)):
            asked = [missing[k] for k in batch]
            try:
                self.calls += 1
                got = self._model(asked, tokenized)
                vectors = self._checked(len(batch), got)
            except EmbeddingRefusedError as exc:
                vectors = self._checked(len(batch), exc.vectors)
                refused.update({batch[i]: why for i, why in exc.refused.items()})
            with self._lock:
                for key, vector in zip(batch, vectors, strict=True):
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

    def _model(self, inputs: list[str | Tokenized], tokenized: bool) -> Matrix:
        """The model's vectors for a batch: its blocking call, or its awaited one."""
        model = self.embedder
        if not (self.awaited and in_asyncio()):
            if tokenized:
                return model.embed_tokenized(cast(list[Tokenized], inputs))
            return model.embed([_text(i) for i in inputs])
        if tokenized:
            return await_only(model.aembed_tokenized(cast(list[Tokenized], inputs)))
        return await_only(model.aembed([_text(i) for i in inputs]))

    def _checked(self, count: int, vectors: Matrix) -> Matrix:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (count, self.embedder.dimension):
            raise BackendError(
                f"embedder {self.embedder.model_id} returned shape {vectors.shape} "
                f"for {count} texts, expected dimension {self.embedder.dimension}"
            )
        return vectors


def _text(value: str | Tokenized) -> str:
    return value if isinstance(value, str) else value.text
