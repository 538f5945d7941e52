"""The reference vector store: a dict of rows per index, scored exactly with numpy."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recallstack.adapters.memory import CAPABILITIES
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore
from recallstack.core.filters import Node, matches
from recallstack.core.metadata import Metadata
from recallstack.core.scores import best, score
from recallstack.core.vectors import (
    PARTITION_KEYS,
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    StoredVector,
    keeping_partition,
)


@dataclass
class _Index:
    """The rows, and the ids of each partition (`Partition.fields`, one entry per key),
    so that a partitioned query checks that partition's rows, not every row."""

    dimension: int
    metric: Metric
    rows: dict[str, tuple[Matrix, Metadata]] = field(default_factory=dict)
    partitions: dict[tuple[str, Any], set[str]] = field(default_factory=dict)

    def put(self, id_: str, vector: Matrix, metadata: Metadata) -> None:
        if id_ in self.rows:
            self.remove(id_)
        self.rows[id_] = (vector, metadata)
        for entry in _partition_entries(metadata):
            self.partitions.setdefault(entry, set()).add(id_)

    def remove(self, id_: str) -> None:
        _, metadata = self.rows.pop(id_)
        for entry in _partition_entries(metadata):
            self.partitions[entry].discard(id_)
            if not self.partitions[entry]:
                del self.partitions[entry]

    def candidates(self, partition: Partition | None) -> list[str]:
        """The ids the partition holds; all, without one."""
        if partition is None:
            return list(self.rows)
        groups = [self.partitions.get(entry, set()) for entry in partition.fields().items()]
        return list(set.intersection(*groups))

    def targets(self, target: list[str] | Node | None, partition: Partition | None) -> list[str]:
        """The ids an update or delete reaches (no target: all the partition's)."""
        if isinstance(target, list):
            return [
                i
                for i in target
                if i in self.rows and (partition is None or partition.holds(self.rows[i][1]))
            ]
        return [i for i in self.candidates(partition) if matches(target, self.rows[i][1])]


def _partition_entries(metadata: Metadata) -> list[tuple[str, Any]]:
    return [(key, metadata[key]) for key in PARTITION_KEYS if key in metadata]


class InMemoryVectorStore(VectorStore):
    """Exact search over every row; all metrics and operators. Thread-safe."""

    backend = "memory"
    capabilities = CAPABILITIES

    def __init__(self) -> None:
        self._indexes: dict[str, _Index] = {}
        self._lock = threading.RLock()

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        index = self._indexes.get(name)
        return None if index is None else (index.dimension, index.metric)

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        with self._lock:
            self._indexes.setdefault(name, _Index(dimension, config.metric))

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_, vector, metadata in zip(batch.ids, batch.vectors, batch.metadata, strict=True):
                index.put(id_, vector.copy(), metadata)

    def _query(
        self,
        name: str,
        vector: Matrix,
        top_k: int,
        filter: Node | None,
        partition: Partition | None,
        include_vector: bool,
        min_score: float | None,
    ) -> list[QueryResult]:
        with self._lock:
            index = self._indexes[name]
            rows = ((i, index.rows[i]) for i in index.candidates(partition))
            hits = [(i, row) for i, row in rows if matches(filter, row[1])]
        if not hits:
            return []
        ids = [i for i, _ in hits]
        scores = score(np.stack([row[0] for _, row in hits]), vector, index.metric)
        return [
            QueryResult(
                id=ids[n],
                score=float(scores[n]),
                metadata=hits[n][1][1],
                vector=hits[n][1][0].tolist() if include_vector else None,
            )
            for n in best(scores, ids, top_k, min_score)
        ]

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        with self._lock:
            rows = self._indexes[name].rows
            found = [(i, rows[i]) for i in ids if i in rows]
        return [StoredVector(id=i, vector=v.tolist(), metadata=m) for i, (v, m) in found]

    def _describe_index(self, name: str) -> IndexStats:
        index = self._indexes[name]
        return IndexStats(dimension=index.dimension, count=len(index.rows), metric=index.metric)

    def _list_indexes(self) -> list[str]:
        return list(self._indexes)

    def _delete_index(self, name: str) -> None:
        with self._lock:
            self._indexes.pop(name, None)

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_ in index.targets(target, partition):
                old_vector, old_metadata = index.rows[id_]
                index.put(
                    id_,
                    old_vector if vector is None else vector.copy(),
                    old_metadata if metadata is None else keeping_partition(metadata, old_metadata),
                )

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_ in index.targets(target, partition):
                index.remove(id_)
