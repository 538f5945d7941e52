"""The vector store contract (docs/spec/backends.md §2).

Public methods validate every argument, then call the adapter's `_`-methods,
so bad input is refused the same way on every backend and before anything is
written. An adapter implements the abstract methods only.
"""

from __future__ import annotations

import functools
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.errors import (
    BackendError,
    DimensionMismatchError,
    IndexNotFoundError,
    InvalidInputError,
    RecallstackError,
    UnsupportedFeatureError,
    UnsupportedFilterError,
)
from recallstack.core.filters import Node, parse_filter
from recallstack.core.inputs import is_positive_int
from recallstack.core.metadata import Metadata, normalize_metadata
from recallstack.core.vectors import (
    METRICS,
    PARTITION_KEYS,
    Everywhere,
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    Reach,
    StoredVector,
    trusted_hit,
)

log = logging.getLogger(__name__)

FilterInput = Mapping[str, Any] | Node | None
"""A filter document, or one already parsed by `parse_filter`."""


Method = TypeVar("Method", bound=Callable[..., Any])


def wraps_driver_errors(method: Method) -> Method:
    """Re-raise what the store's `driver_errors` catch as `BackendError`, the original
    kept as its cause (docs/spec/backends.md §2); recallstack's own errors pass unchanged."""

    @functools.wraps(method)
    def call(self: VectorStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except RecallstackError:
            raise
        except self.driver_errors as exc:
            raise BackendError(f"{self.backend}: {exc}") from exc

    return cast(Method, call)


@dataclass(frozen=True)
class VectorBatch:
    """A validated upsert: ids, an (n, d) float32 matrix, normalised metadata (which
    holds the batch's partition, if it has one, under `PARTITION_KEYS`)."""

    ids: list[str]
    vectors: Matrix
    metadata: list[Metadata]


class VectorStore(ABC):
    """An index-of-vectors backend. Subclasses set `backend` and `capabilities`."""

    backend: ClassVar[str]
    capabilities: Capabilities = Capabilities()
    """What this store honours; a store may narrow it per instance (per mode)."""
    driver_errors: ClassVar[tuple[type[Exception], ...]] = ()
    """What the driver raises, for stores that do not wrap it themselves: every
    public method re-raises it as `BackendError`."""
    asyncio_driver: bool = False
    """Whether this store awaits its driver's asyncio API when `AsyncMemory` calls it
    (core/runtime/awaiting.py); otherwise AsyncMemory calls it in a worker thread. A store may
    set it per instance (per mode)."""

    # ---- public, validated API ------------------------------------------------

    @wraps_driver_errors
    def create_index(
        self,
        name: str,
        dimension: int,
        metric: Metric | None = None,
        config: IndexConfig | Mapping[str, Any] | None = None,
    ) -> None:
        """Create an index; idempotent. Another dimension → `DimensionMismatchError`."""
        _check_name(name)
        if not is_positive_int(dimension):
            raise InvalidInputError(f"index {name!r}: dimension must be a positive int")
        cfg = IndexConfig.model_validate(config or {})
        if metric is not None:
            cfg = cfg.model_copy(update={"metric": metric})
        if cfg.metric not in METRICS:
            raise InvalidInputError(f"index {name!r}: unknown metric {cfg.metric!r}")
        if cfg.metric not in self.capabilities.metrics:
            raise UnsupportedFeatureError(
                f"the {self.backend} backend does not support the {cfg.metric} metric"
            )
        if cfg.type is not None and cfg.type not in self.capabilities.index_types:
            log.warning(
                "the %s backend has no %s index; index %r uses its default",
                self.backend,
                cfg.type,
                name,
            )
            cfg = cfg.model_copy(update={"type": None})
        existing = self._shape(name)
        if existing is not None:
            if existing[0] != dimension:
                raise DimensionMismatchError(existing[0], dimension, f"index {name!r}")
            return
        self._create_index(name, dimension, cfg)

    @wraps_driver_errors
    def upsert(
        self,
        name: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]] | Matrix,
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        partition: Reach,
    ) -> list[str]:
        """Insert or overwrite vectors by id, in a partition or in none (`EVERYWHERE`);
        returns the ids. An id is one vector in the whole index: written again in
        another partition, it moves there."""
        into = _partition(partition)
        dimension, metric = self._require(name)
        batch = _validate_batch(ids, vectors, metadata, dimension, metric, name, into)
        self._upsert(name, batch)
        return batch.ids

    @wraps_driver_errors
    def query(
        self,
        name: str,
        vector: Sequence[float] | Matrix,
        top_k: int = 10,
        filter: FilterInput = None,
        include_vector: bool = False,
        min_score: float | None = None,
        *,
        partition: Reach,
    ) -> list[QueryResult]:
        """The top_k most similar vectors of the partition that match the filter, best
        first, ties by id."""
        within = _partition(partition)
        if not is_positive_int(top_k):
            raise InvalidInputError(f"top_k must be a positive int, got {top_k!r}")
        if top_k > self.capabilities.max_top_k:
            raise InvalidInputError(
                f"top_k {top_k} is above the {self.backend} backend's largest, "
                f"{self.capabilities.max_top_k}"
            )
        if min_score is not None and (
            isinstance(min_score, bool)
            or not isinstance(min_score, int | float)
            or not math.isfinite(min_score)
        ):
            raise InvalidInputError(f"min_score must be a finite number, got {min_score!r}")
        node = self._filter(filter)
        dimension, metric = self._require(name)
        q = check_vector(vector, dimension, metric, f"query on index {name!r}")
        hits = self._query(name, q, top_k, node, within, include_vector, min_score)
        if metric == "cosine" and any(not -1.0 <= h.score <= 1.0 for h in hits):
            # an engine's rounding stepped past ±1 (a vector with itself): held to the
            # range, the hits it makes tie are ordered by id, as every tie is
            hits = sorted(map(_clamped, hits), key=lambda h: (-h.score, h.id))
        return hits

    @wraps_driver_errors
    def get(self, name: str, ids: Sequence[str]) -> list[StoredVector]:
        """The vectors and metadata stored under these ids, in the order asked; an id
        not stored is left out. Asked of the adapter `max_filter_values` ids at a time."""
        wanted = list(dict.fromkeys(_check_ids(ids, f"get from index {name!r}")))
        self._require(name)
        found: dict[str, StoredVector] = {}
        for group in batched(wanted, self.capabilities.max_filter_values):
            found |= {v.id: v for v in self._get(name, list(group))}
        return [found[i] for i in wanted if i in found]

    @wraps_driver_errors
    def describe_index(self, name: str) -> IndexStats:
        self._require(name)
        return self._describe_index(name)

    @wraps_driver_errors
    def list_indexes(self) -> list[str]:
        return sorted(self._list_indexes())

    @wraps_driver_errors
    def delete_index(self, name: str) -> None:
        self._require(name)
        self._delete_index(name)

    @wraps_driver_errors
    def update(
        self,
        name: str,
        id: str | None = None,
        filter: FilterInput = None,
        vector: Sequence[float] | Matrix | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        partition: Reach,
    ) -> None:
        """Replace the vector and/or the metadata of one id or of every match in the
        partition. A vector stays in the partition it was written in: new metadata
        replaces all but the partition's keys."""
        within = _partition(partition)
        target = self._target(name, [id] if id is not None else None, filter, "update")
        if vector is None and metadata is None:
            raise InvalidInputError("update needs a vector, metadata or both")
        dimension, metric = self._require(name)
        v = None if vector is None else check_vector(vector, dimension, metric, "update")
        meta = None
        if metadata is not None:
            meta = _partitioned(normalize_metadata(metadata, "update.metadata"), None, "update")
        self._update(name, target, within, v, meta)

    @wraps_driver_errors
    def delete(
        self,
        name: str,
        ids: Sequence[str] | None = None,
        filter: FilterInput = None,
        *,
        partition: Reach,
    ) -> None:
        """Delete by ids or by filter (at most one), within the partition; with neither,
        every vector of the partition (never of the whole index). No match is a no-op."""
        within = _partition(partition)
        whole = ids is None and filter is None and within is not None
        target = None if whole else self._target(name, ids, filter, "delete")
        self._require(name)
        self._delete(name, target, within)

    # ---- shared checks --------------------------------------------------------

    def _filter(self, filter: FilterInput) -> Node | None:
        if filter is None:
            return None
        node = filter if isinstance(filter, Node) else parse_filter(filter)
        refused = self.capabilities.unsupported(node)
        if refused is not None:
            raise UnsupportedFilterError(refused, self.backend)
        return node

    def _target(
        self, name: str, ids: Sequence[str] | None, filter: FilterInput, what: str
    ) -> list[str] | Node:
        _check_name(name)
        if (ids is None) == (filter is None):
            raise InvalidInputError(f"{what} takes exactly one of ids/id or filter")
        if ids is not None:
            return _check_ids(ids, what)
        node = self._filter(filter)
        if node is None:
            raise InvalidInputError(f"{what}: an empty filter would match everything; refused")
        return node

    def _require(self, name: str) -> tuple[int, Metric]:
        _check_name(name)
        shape = self._shape(name)
        if shape is None:
            raise IndexNotFoundError(name)
        return shape

    # ---- what an adapter implements ---------------------------------------------

    @abstractmethod
    def _shape(self, name: str) -> tuple[int, Metric] | None:
        """(dimension, metric) of an index, or None when it does not exist. Keep it cheap."""

    @abstractmethod
    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None: ...

    @abstractmethod
    def _upsert(self, name: str, batch: VectorBatch) -> None: ...

    @abstractmethod
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
        """The best hits among the vectors `partition.holds` (all, when None) that match
        the filter."""

    @abstractmethod
    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        """The stored vectors of these ids (at most `max_filter_values`, no repeats), in
        any order; ids not stored are left out."""

    @abstractmethod
    def _describe_index(self, name: str) -> IndexStats: ...

    @abstractmethod
    def _list_indexes(self) -> list[str]: ...

    @abstractmethod
    def _delete_index(self, name: str) -> None: ...

    @abstractmethod
    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        """Replace what is given of the targets the partition holds (all, when None); new
        metadata (which never names a partition key) keeps each target's partition keys."""

    @abstractmethod
    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        """Delete the targets the partition holds (all of the index's, without one); no
        target is every vector of the partition."""

    def wait_until_consistent(self, name: str) -> None:
        """Block until earlier writes to `name` are visible to queries.

        Backends with eventual consistency override this; the conformance suite
        calls it after writes instead of sleeping. The default returns at once.
        """

    def close(self) -> None:
        """Release connections; the default has nothing to release."""


def _partition(partition: Reach) -> Partition | None:
    """The partition a call names, None for `EVERYWHERE`; anything else is refused."""
    if isinstance(partition, Partition):
        return partition
    if isinstance(partition, Everywhere):
        return None
    raise InvalidInputError(
        f"partition must be a Partition or EVERYWHERE, got {type(partition).__name__}"
    )


def _partitioned(metadata: Metadata, partition: Partition | None, where: str) -> Metadata:
    """The metadata with the partition's keys, which it may not name itself."""
    if not metadata.keys().isdisjoint(PARTITION_KEYS):
        key = next(k for k in PARTITION_KEYS if k in metadata)
        raise InvalidInputError(
            f"{where}: {key!r} is the partition's, not metadata: pass partition=Partition(...)"
        )
    return metadata if partition is None else {**metadata, **partition.fields()}


def _clamped(hit: QueryResult) -> QueryResult:
    if -1.0 <= hit.score <= 1.0:
        return hit
    return trusted_hit(hit.id, min(1.0, max(-1.0, hit.score)), hit.metadata, hit.vector)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"index names must be non-empty strings, got {name!r}")


def _check_ids(ids: Sequence[str], what: str) -> list[str]:
    if isinstance(ids, str) or not ids:
        raise InvalidInputError(f"{what}: ids must be a non-empty list of strings")
    return [_check_id(i, f"{what}.ids[{n}]") for n, i in enumerate(ids)]


def _check_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{where}: ids must be non-empty strings, got {value!r}")
    return value


def check_vector(
    vector: Sequence[float] | Matrix, dimension: int, metric: Metric, where: str
) -> Matrix:
    """One vector as float32, refused (`InvalidInputError`, naming `where`) when it has
    another dimension, a NaN or infinite component, or is zero under cosine."""
    try:
        v = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{where}: the vector is not a list of numbers") from exc
    if v.ndim != 1:
        raise InvalidInputError(f"{where}: expected one vector, got shape {v.shape}")
    if v.shape[0] != dimension:
        raise DimensionMismatchError(dimension, v.shape[0], where)
    # the usual case in one BLAS call: a finite, non-zero sum of squares means every
    # component is finite and one is not zero; otherwise (a sum that overflowed or
    # underflowed included) the exact checks below decide
    squares = float(v.dot(v))
    if squares != 0.0 and math.isfinite(squares):
        return v
    largest = float(np.abs(v).max())  # NaN and infinity propagate: one check for all three
    if not math.isfinite(largest):
        raise InvalidInputError(f"{where}: the vector has NaN or infinite components")
    if metric == "cosine" and largest == 0.0:
        raise InvalidInputError(f"{where}: a zero vector has no cosine similarity")
    return v


def _validate_batch(
    ids: Sequence[str],
    vectors: Sequence[Sequence[float]] | Matrix,
    metadata: Sequence[Mapping[str, Any] | None] | None,
    dimension: int,
    metric: Metric,
    name: str,
    partition: Partition | None,
) -> VectorBatch:
    where = f"upsert into index {name!r}"
    if isinstance(ids, str):
        raise InvalidInputError(f"{where}: ids must be a list of strings, not one string")
    id_list = list(ids)
    for n, i in enumerate(id_list):
        if type(i) is not str or not i:  # the message is built only for a bad id
            _check_id(i, f"{where}: ids[{n}]")
    if not id_list:
        raise InvalidInputError(f"{where}: the batch is empty")
    if len(set(id_list)) != len(id_list):
        raise InvalidInputError(f"{where}: the batch repeats an id")
    if len(vectors) != len(id_list):
        raise InvalidInputError(f"{where}: {len(id_list)} ids but {len(vectors)} vectors")
    if metadata is not None and len(metadata) != len(id_list):
        raise InvalidInputError(f"{where}: {len(id_list)} ids but {len(metadata)} metadata")
    meta = [
        _partitioned(
            normalize_metadata(m, f"{where}: metadata[{n}]"), partition, f"{where}: metadata[{n}]"
        )
        for n, m in enumerate(metadata or [None] * len(id_list))
    ]
    return VectorBatch(id_list, _validate_matrix(vectors, dimension, metric, where), meta)


def _validate_matrix(
    vectors: Sequence[Sequence[float]] | Matrix, dimension: int, metric: Metric, where: str
) -> Matrix:
    """The batch as a new (n, d) float32 matrix, checked in one numpy pass.

    When a row is bad, that row is checked alone, so the error names it.
    """
    try:
        matrix = np.array(vectors, dtype=np.float32)
    except (TypeError, ValueError):
        matrix = None
    if matrix is None or matrix.ndim != 2 or matrix.shape[1] != dimension:
        rows = [
            check_vector(v, dimension, metric, f"{where}: vectors[{n}]")
            for n, v in enumerate(vectors)
        ]
        return np.stack(rows)
    # as in check_vector: finite, non-zero sums of squares prove every row good, in
    # one pass with no temporary; otherwise the largest components decide
    squares = np.einsum("ij,ij->i", matrix, matrix)
    if np.isfinite(squares).all() and (metric != "cosine" or squares.all()):
        return matrix
    largest = np.abs(matrix).max(axis=1)  # NaN and infinity propagate, as in check_vector
    bad = ~np.isfinite(largest) | ((largest == 0.0) if metric == "cosine" else False)
    if bad.any():
        n = int(np.argmax(bad))
        check_vector(matrix[n], dimension, metric, f"{where}: vectors[{n}]")  # raises
    return matrix
