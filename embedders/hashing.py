"""`hash/<dimension>`: a deterministic, offline embedder for tests and tiny setups.

NOT semantic: it hashes lowercased words into a signed bag-of-words vector, so
texts are similar when they share words, never when they merely mean the
same thing. Use `local/...` for meaning.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from recallstack.core.contracts.embedder import Embedder
from recallstack.core.errors import EmbeddingRefusedError, InvalidInputError
from recallstack.core.vectors import Matrix

_WORD = re.compile(r"[a-z0-9]+")
_WORD_ANY_CASE = re.compile(r"[a-z0-9]+", re.IGNORECASE)


class HashEmbedder(Embedder):
    """Its tokens are words: an input holds at most `max_input` (2,000) of them."""

    def __init__(self, dimension: int = 256) -> None:
        if dimension <= 0:
            raise InvalidInputError(f"hash embedder dimension must be positive, got {dimension}")
        self.dimension = dimension
        self.model_id = f"hash-{dimension}"
        self.max_input = 2000
        self.batch_size = 512

    def token_offsets(self, text: str) -> Sequence[int]:
        return [match.start() for match in _WORD_ANY_CASE.finditer(text)]

    def embed(self, texts: Sequence[str]) -> Matrix:
        refused = self.over_limit(self.token_counts(texts))
        if refused:
            raise EmbeddingRefusedError(refused, self._embed(texts))
        return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dimension] += 1.0 if value >> 63 else -1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else _fallback(self.dimension)
        return out


def _fallback(dimension: int) -> Matrix:
    """Texts without words still get a valid (non-zero) vector."""
    vector = np.zeros(dimension, dtype=np.float32)
    vector[0] = 1.0
    return vector


def from_spec(spec: str) -> HashEmbedder:
    """`hash/256` → a 256-dimensional hash embedder."""
    _, _, size = spec.partition("/")
    if not size.isdigit():
        raise InvalidInputError(f"{spec!r}: write hash/<dimension>, e.g. hash/256")
    return HashEmbedder(int(size))
