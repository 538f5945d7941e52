"""The data the vector benches load: clustered 384-d vectors and scope metadata."""

from __future__ import annotations

from typing import Any

import numpy as np

DIM = 384
RESOURCES = 100
"""A `resource_id` filter selects 1% of the vectors."""


def clustered(size: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors around size/50 topics, like sentence embeddings; probes near stored rows.

    (Pure Gaussian noise in 384 dimensions is the worst case of any ANN index and
    looks nothing like text embeddings. Unit length, as the embedders recallstack
    ships give them: the local model normalises, and OpenAI's are unit vectors.)
    """
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(max(1, size // 50), DIM))
    data = centers[rng.integers(0, len(centers), size)] + 0.6 * rng.normal(size=(size, DIM))
    picks = rng.integers(0, size, queries)
    probes = data[picks] + 0.6 * rng.normal(size=(queries, DIM))
    return _unit(data), _unit(probes)


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def scopes(lo: int, hi: int) -> list[dict[str, Any]]:
    """The metadata of vectors lo..hi-1: a resource_id and a thread_id each."""
    return [
        {"resource_id": f"r{i % RESOURCES}", "thread_id": f"t{i % 1000}"} for i in range(lo, hi)
    ]
