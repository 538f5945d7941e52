"""The Qdrant vector store, over either driver (Edge in process, or the client).

Behaviour shared by every mode lives here: UUIDv5 ids with the caller's id in
the payload, the payload encoding that keeps filters exact, scores in the one
convention, ties ordered by id, and the original length of cosine vectors
(Qdrant normalises them) so `include_vector` returns what was stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol

import numpy as np

from recallstack.adapters.qdrant import CAPABILITIES
from recallstack.adapters.qdrant.filters import Dialect, compile_filter
from recallstack.adapters.qdrant.payload import (
    decode,
    encode,
    encode_scalar,
    field,
    length,
    point_id,
)
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore, wraps_driver_errors
from recallstack.core.errors import IndexNotFoundError
from recallstack.core.filters import Node, matches
from recallstack.core.metadata import Metadata
from recallstack.core.scores import past_ties, ranked
from recallstack.core.vectors import (
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    StoredVector,
    keeping_partition,
)

BATCH = 512


class Driver(Protocol):
    """The primitive operations one Qdrant API offers, per logical index."""

    dialect: Dialect
    asyncio_driver: bool
    """Whether its calls await an asyncio client under `AsyncMemory` (core/runtime/awaiting.py)."""
    filters_each_point: bool
    """Whether the engine tests a filter against every point in Python (the client's
    local mode), so that a filtered search costs what the collection holds."""

    def indexes(self) -> dict[str, tuple[int, Metric]]: ...
    def shape(self, name: str) -> tuple[int, Metric] | None:
        """(dimension, metric) of one index; cheap, since every query asks."""
        ...

    def create(self, name: str, dimension: int, config: IndexConfig) -> None: ...
    def drop(self, name: str) -> None: ...
    def upsert(self, name: str, points: Iterable[tuple[str, list[float], dict[str, Any]]]) -> None:
        """Write points given as (point id, vector, payload)."""
        ...

    def search(
        self,
        name: str,
        vector: list[float],
        limit: int,
        filter: Any,
        with_vector: bool,
        exact: bool,
    ) -> list[tuple[dict[str, Any], float, list[float] | None]]: ...
    def points(
        self, name: str, ids: list[str] | None, filter: Any
    ) -> list[tuple[str, dict[str, Any]]]: ...
    def stored(self, name: str, ids: list[str]) -> list[tuple[dict[str, Any], list[float]]]: ...
    def delete(self, name: str, ids: list[str] | None, filter: Any) -> None: ...
    def set_vector(self, name: str, pid: str, vector: list[float]) -> None: ...
    def set_payload(self, name: str, pid: str, payload: dict[str, Any]) -> None: ...
    def count(self, name: str) -> int: ...
    def close(self) -> None: ...


LOCAL_MODE_FILTER_VALUES = 1_000
"""The most values one `$in`/`$nin`/`$all` may list in qdrant-client's local mode."""
NEAREST_FIRST = 100
"""How many unfiltered nearest points a filtered search in the local mode reads first."""


class QdrantVectorStore(VectorStore):
    driver_errors = (Exception,)
    """qdrant-edge raises plain `Exception`; qdrant-client raises httpx, gRPC and its own."""

    @wraps_driver_errors
    def __init__(
        self,
        url: str,
        backend: Literal["qdrant-edge", "qdrant"],
        search: Literal["auto", "exact"] = "auto",
        **options: Any,
    ) -> None:
        from recallstack.adapters.qdrant.client import ClientDriver
        from recallstack.adapters.qdrant.edge import EdgeDriver

        self.backend = backend  # type: ignore[misc]
        self.driver: Driver = (
            EdgeDriver(url, **options) if backend == "qdrant-edge" else ClientDriver(url, **options)
        )
        self.asyncio_driver = self.driver.asyncio_driver
        self.search = search
        narrowed: dict[str, Any] = {"exact": search == "exact"}
        if self.driver.filters_each_point:
            # the local mode tests every alternative of every point in Python: a
            # numeric $in of 10,000 values over 1,200 points takes tens of seconds
            narrowed["max_filter_values"] = LOCAL_MODE_FILTER_VALUES
        self.capabilities = CAPABILITIES.model_copy(update=narrowed)

    def close(self) -> None:
        self.driver.close()

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        return self.driver.shape(name)

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        self.driver.create(name, dimension, config)

    def _list_indexes(self) -> list[str]:
        return list(self.driver.indexes())

    def _delete_index(self, name: str) -> None:
        self.driver.drop(name)

    def _describe_index(self, name: str) -> IndexStats:
        shape = self._shape(name)
        if shape is None:
            raise IndexNotFoundError(name)
        return IndexStats(dimension=shape[0], count=self.driver.count(name), metric=shape[1])

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        lengths = self._lengths(name, batch.vectors)
        for start in range(0, len(batch.ids), BATCH):
            rows = slice(start, start + BATCH)
            # a generator: each point's list and dict are freed once the driver has
            # converted them, instead of a chunk's worth piling up and bringing Python's
            # garbage collector round to scan them (3 µs a point, measured)
            self.driver.upsert(
                name,
                (
                    (point_id(id_), vector.tolist(), encode(id_, meta, size))
                    for id_, vector, meta, size in zip(
                        batch.ids[rows],
                        batch.vectors[rows],
                        batch.metadata[rows],
                        lengths[rows],
                        strict=True,
                    )
                ),
            )

    def _lengths(self, name: str, vectors: Matrix) -> list[float]:
        """Each row's length when the index is cosine (Qdrant keeps those normalised), else 1."""
        shape = self._shape(name)
        if shape is None or shape[1] != "cosine":
            return [1.0] * len(vectors)
        lengths: list[float] = np.sqrt(np.einsum("ij,ij->i", vectors, vectors)).tolist()
        return lengths

    def _within(self, compiled: Any, partition: Partition | None) -> Any:
        """A compiled filter (or None) restricted to the partition: a keyword match on
        each of its keys, which have payload indexes (`INDEXED_FIELDS`)."""
        if partition is None:
            return compiled
        d = self.driver.dialect
        must = [d.match(field((k,)), encode_scalar(v)) for k, v in partition.fields().items()]
        return d.filter(must=must if compiled is None else [*must, compiled])

    def _compiled(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> tuple[list[str] | None, Any]:
        """Point ids (those of the partition, when there is one) or a filter."""
        if target is None:
            return None, self._within(None, partition)
        if not isinstance(target, list):
            return None, self._within(compile_filter(target, self.driver.dialect), partition)
        ids = [point_id(i) for i in target]
        if partition is None:
            return ids, None
        held = self.driver.points(name, ids, None)
        return [pid for pid, payload in held if partition.holds(decode(payload)[1])], None

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        ids, flt = self._compiled(name, target, partition)
        if ids == []:
            return
        new_length = None if vector is None else self._lengths(name, vector[np.newaxis])[0]
        for pid, payload in self.driver.points(name, ids, flt):
            if vector is not None:
                self.driver.set_vector(name, pid, vector.tolist())
            id_, kept = decode(payload)
            if metadata is not None:
                kept = keeping_partition(metadata, kept)
            size = length(payload) if new_length is None else new_length
            self.driver.set_payload(name, pid, encode(id_, kept, size))

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        shape = self._shape(name)
        assert shape is not None
        found = []
        for payload, vector in self.driver.stored(name, [point_id(i) for i in ids]):
            id_, metadata = decode(payload)
            if shape[1] == "cosine":  # stored normalised, its length beside it
                size = length(payload)
                vector = [x * size for x in vector]
            found.append(StoredVector(id=id_, vector=vector, metadata=metadata))
        return found

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        ids, flt = self._compiled(name, target, partition)
        if ids != []:
            self.driver.delete(name, ids, flt)

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
        shape = self._shape(name)
        assert shape is not None
        metric = shape[1]
        compiled = None if filter is None else compile_filter(filter, self.driver.dialect)
        compiled = self._within(compiled, partition)
        query = vector.tolist()
        exact = self.search == "exact"

        def keep(metadata: Metadata) -> bool:
            in_partition = partition is None or partition.holds(metadata)
            return in_partition and matches(filter, metadata)

        def search(n: int) -> list[tuple[dict[str, Any], float, list[float] | None]]:
            if compiled is not None and self.driver.filters_each_point:
                return self._nearest_matching(name, query, n, keep, compiled, include_vector)
            return self.driver.search(name, query, n, compiled, include_vector, exact)

        hits = past_ties(search, top_k, lambda hit: hit[1])
        scored = []
        for payload, raw, stored in hits:
            id_, metadata = decode(payload)
            score = 1.0 / (1.0 + raw) if metric == "euclidean" else raw
            if stored is not None and metric == "cosine":
                size = length(payload)
                stored = [x * size for x in stored]
            scored.append((score, id_, metadata, stored))
        return ranked(scored, top_k, min_score)

    def _nearest_matching(
        self,
        name: str,
        query: list[float],
        n: int,
        keep: Callable[[Metadata], bool],
        compiled: Any,
        include_vector: bool,
    ) -> list[tuple[dict[str, Any], float, list[float] | None]]:
        """The n nearest points `keep` keeps (those `compiled` matches), for an engine
        that tests a filter against every point in Python (the client's local mode:
        ~8 µs a point, so 21 ms at 2,760 points, while its unfiltered search is numpy).

        The nearest points are read unfiltered and kept here (`keep`: the partition,
        and the filter with the reference semantics of `core.filters.matches`), as
        the compiled filter would. Points beyond those read score no higher than the
        last one read, so the first n kept are the n nearest. When fewer are kept,
        as many more are read as the share found suggests. The engine filters
        instead whenever that would read more than a quarter of the collection (a
        rare partition, a large n): reading points unfiltered costs about what
        filtering them does.
        """
        total = self.driver.count(name)
        fetch = max(4 * n, NEAREST_FIRST)
        while fetch <= total // 4:
            hits = self.driver.search(name, query, fetch, None, include_vector, False)
            kept = [hit for hit in hits if keep(decode(hit[0])[1])]
            if len(kept) >= n:
                return kept[:n]
            fetch = 2 * fetch * n // len(kept) if kept else total
        return self.driver.search(name, query, n, compiled, include_vector, False)
