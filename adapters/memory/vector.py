"""The reference vector store: a dict of rows per index, scored exactly with numpy."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from recallstack.adapters.memory import CAPABILITIES
from recallstack.core.filters import Node, matches
from recallstack.core.metadata import Metadata
from recallstack.core.scores import Matrix, best, score
from recallstack.core.vector_store import VectorBatch, VectorStore
from recallstack.core.vectors import IndexConfig, IndexStats, Metric, QueryResult


@dataclass
class _Index:
    dimension: int
    metric: Metric
    rows: dict[str, tuple[Matrix, Metadata]] = field(default_factory=dict)


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
            rows = self._indexes[name].rows
            for id_, vector, metadata in zip(batch.ids, batch.vectors, batch.metadata, strict=True):
                rows[id_] = (vector.copy(), metadata)

    def _query(
        self,
        name: str,
        vector: Matrix,
        top_k: int,
        filter: Node | None,
        include_vector: bool,
        min_score: float | None,
    ) -> list[QueryResult]:
        with self._lock:
            index = self._indexes[name]
            hits = [(i, row) for i, row in index.rows.items() if matches(filter, row[1])]
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

    def _describe_index(self, name: str) -> IndexStats:
        index = self._indexes[name]
        return IndexStats(dimension=index.dimension, count=len(index.rows), metric=index.metric)

    def _list_indexes(self) -> list[str]:
        return list(self._indexes)

    def _delete_index(self, name: str) -> None:
        with self._lock:
            self._indexes.pop(name, None)

    def _matching(self, index: _Index, target: list[str] | Node) -> list[str]:
        if isinstance(target, list):
            return [i for i in target if i in index.rows]
        return [i for i, (_, metadata) in index.rows.items() if matches(target, metadata)]

    def _update(
        self, name: str, target: list[str] | Node, vector: Matrix | None, metadata: Metadata | None
    ) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_ in self._matching(index, target):
                old_vector, old_metadata = index.rows[id_]
                index.rows[id_] = (
                    old_vector if vector is None else vector.copy(),
                    old_metadata if metadata is None else metadata,
                )

    def _delete(self, name: str, target: list[str] | Node) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_ in self._matching(index, target):
                del index.rows[id_]
