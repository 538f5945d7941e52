"""The reference vector store: a dict of rows per index, scored exactly with numpy."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from recallstack.adapters.memory import CAPABILITIES
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore
from recallstack.core.filters import SCOPE_KEYS, Node, matches, scope_of
from recallstack.core.metadata import Metadata
from recallstack.core.scores import best, score
from recallstack.core.vectors import (
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    QueryResult,
    StoredVector,
)


@dataclass
class _Index:
    """The rows, and the ids under each scope value (`SCOPE_KEYS`), so that a scoped
    query checks the rows of its scope, not every row."""

    dimension: int
    metric: Metric
    rows: dict[str, tuple[Matrix, Metadata]] = field(default_factory=dict)
    scopes: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def put(self, id_: str, vector: Matrix, metadata: Metadata) -> None:
        if id_ in self.rows:
            self.remove(id_)
        self.rows[id_] = (vector, metadata)
        for entry in _scope_entries(metadata):
            self.scopes.setdefault(entry, set()).add(id_)

    def remove(self, id_: str) -> None:
        _, metadata = self.rows.pop(id_)
        for entry in _scope_entries(metadata):
            self.scopes[entry].discard(id_)
            if not self.scopes[entry]:
                del self.scopes[entry]

    def candidates(self, filter: Node | None) -> list[str]:
        """The ids that may match: a scope's ids when the filter names one, else all."""
        equalities = scope_of(filter, SCOPE_KEYS).equalities
        if not equalities:
            return list(self.rows)
        groups = [self.scopes.get(entry, set()) for entry in equalities.items()]
        return list(set.intersection(*groups))


def _scope_entries(metadata: Metadata) -> list[tuple[str, str]]:
    """(key, value) for each string a scope key holds, a list's strings included
    (`$eq` matches a list that contains the value)."""
    entries = []
    for key in SCOPE_KEYS:
        value = metadata.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                entries.append((key, item))
    return entries


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
        include_vector: bool,
        min_score: float | None,
    ) -> list[QueryResult]:
        with self._lock:
            index = self._indexes[name]
            rows = ((i, index.rows[i]) for i in index.candidates(filter))
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

    def _matching(self, index: _Index, target: list[str] | Node) -> list[str]:
        if isinstance(target, list):
            return [i for i in target if i in index.rows]
        return [i for i in index.candidates(target) if matches(target, index.rows[i][1])]

    def _update(
        self, name: str, target: list[str] | Node, vector: Matrix | None, metadata: Metadata | None
    ) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_ in self._matching(index, target):
                old_vector, old_metadata = index.rows[id_]
                index.put(
                    id_,
                    old_vector if vector is None else vector.copy(),
                    old_metadata if metadata is None else metadata,
                )

    def _delete(self, name: str, target: list[str] | Node) -> None:
        with self._lock:
            index = self._indexes[name]
            for id_ in self._matching(index, target):
                index.remove(id_)
