"""The data the vector benches load: clustered 384-d vectors, each in a resource's
partition (and its scope metadata, for the raw drivers compared)."""

from __future__ import annotations

from typing import Any

import numpy as np

from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.vectors import Partition

DIM = 384
RESOURCES = 100
"""A resource's partition holds 1% of the vectors."""
PARTITION = Partition("r7")
"""The resource the benches query."""


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


def upsert_grouped(
    store: VectorStore,
    name: str,
    ids: list[str],
    vectors: np.ndarray,
    partitions: list[Partition],
    metadata: list[dict[str, Any]] | None = None,
) -> None:
    """Each row in its partition (`partitions[n]`), one upsert per partition, as
    Memory's saves write them."""
    groups: dict[Partition, list[int]] = {}
    for n, partition in enumerate(partitions):
        groups.setdefault(partition, []).append(n)
    for partition, rows in groups.items():
        kept = None if metadata is None else [metadata[n] for n in rows]
        store.upsert(name, [ids[n] for n in rows], vectors[rows], kept, partition=partition)


def upsert_partitioned(
    store: VectorStore, name: str, ids: list[str], vectors: np.ndarray, lo: int
) -> None:
    """Vectors lo..lo+len(ids)-1 written in their resources' partitions."""
    owners = [Partition(f"r{(lo + n) % RESOURCES}") for n in range(len(ids))]
    upsert_grouped(store, name, ids, vectors, owners)
