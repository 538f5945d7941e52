"""An LRU cache in front of an embedder, and batching to its limit."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.contracts.embedder import Embedder, Tokenized
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

    def embed(self, inputs: Sequence[str | Tokenized]) -> Matrix:
        """Vectors for the inputs; raises `EmbeddingRefusedError` (positions in `inputs`)
        when the embedder refused some, after caching the others. Inputs chunking
        tokenized already (`Tokenized`) are embedded without tokenizing them again."""
        return run(self._embed(inputs), _Model(self.embedder))

    async def aembed(self, inputs: Sequence[str | Tokenized]) -> Matrix:
        """`embed`, awaiting the embedder's `aembed`."""
        return await arun(self._embed(inputs), _Model(_Awaited(self.embedder)))

    def _embed(self, inputs: Sequence[str | Tokenized]) -> Steps[Matrix]:
        keys = [self._key(i if isinstance(i, str) else i.text) for i in inputs]
        found: dict[tuple[str, bytes], Matrix] = {}
        with self._lock:
            for key in keys:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
        missing = {k: i for k, i in zip(keys, inputs, strict=True) if k not in found}
        tokenized = all(isinstance(i, Tokenized) for i in missing.values())
        refused: dict[tuple[str, bytes], str] = {}
        for batch in batched(list(missing), max(1, self.embedder.batch_size)):
            asked = [missing[k] for k in batch]
            try:
                self.calls += 1
                if tokenized:
                    got = yield from call(Embedder.embed_tokenized, cast(list[Tokenized], asked))
                else:
                    got = yield from call(Embedder.embed, [_text(i) for i in asked])
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


class _Model(NamedTuple):
    """What `_embed`'s calls reach (`core/runtime/calls.py`): the model, blocking or awaited."""

    embedder: Any


class _Awaited:
    """An embedder whose `embed` and `embed_tokenized` are its awaited ones, for `arun`."""

    def __init__(self, embedder: Embedder) -> None:
        self.embed = embedder.aembed
        self.embed_tokenized = embedder.aembed_tokenized
