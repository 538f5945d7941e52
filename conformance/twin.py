"""A backend index and a reference index fed the same writes, compared on every read.

The in-memory reference backend is the oracle: a backend must return the same
ids, in the same order, with the same scores (within 1e-4) as the reference.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import UnsupportedFeatureError, UnsupportedFilterError
from recallstack.core.filters import parse_filter
from recallstack.core.vectors import EVERYWHERE, Metric, QueryResult, Reach, StoredVector

SCORE_TOLERANCE = 1e-4
RECALL_TOLERANCE = 0.95
"""Approximate backends (no exact mode) must find this share of the true top-K."""


class Twin:
    """Writes go to both stores; reads are compared and the backend's answer returned."""

    def __init__(self, store: VectorStore, record_unsupported: Callable[[str], None]) -> None:
        self.store = store
        self.reference = InMemoryVectorStore()
        self.prefix = f"conformance_{uuid.uuid4().hex[:8]}_"
        self.created: list[str] = []
        self._record_unsupported = record_unsupported

    @property
    def capabilities(self) -> Any:
        return self.store.capabilities

    def index(self, dimension: int, metric: Metric = "cosine") -> str:
        """A fresh index on both stores; removed again after the test."""
        name = f"{self.prefix}{len(self.created)}"
        self.created.append(name)
        self.store.create_index(name, dimension, metric=metric)
        self.reference.create_index(name, dimension, metric=metric)
        return name

    def metric_index(self, dimension: int, metric: Metric) -> str | None:
        """An index with this metric, or None after checking an undeclared metric raises."""
        if metric in self.capabilities.metrics:
            return self.index(dimension, metric)
        try:
            self.store.create_index(f"{self.prefix}unsupported", dimension, metric=metric)
        except UnsupportedFeatureError:
            self._record_unsupported(f"metric {metric}")
            return None
        raise AssertionError(f"{self.store.backend} does not declare {metric} but accepted it")

    def upsert(
        self,
        name: str,
        ids: Sequence[str],
        vectors: Any,
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        partition: Reach = EVERYWHERE,
    ) -> None:
        self.store.upsert(name, ids, vectors, metadata, partition=partition)
        self.reference.upsert(name, ids, vectors, metadata, partition=partition)
        self.store.wait_until_consistent(name)

    def delete(self, name: str, partition: Reach = EVERYWHERE, **kwargs: Any) -> None:
        self.store.delete(name, partition=partition, **kwargs)
        self.reference.delete(name, partition=partition, **kwargs)
        self.store.wait_until_consistent(name)

    def update(self, name: str, partition: Reach = EVERYWHERE, **kwargs: Any) -> None:
        self.store.update(name, partition=partition, **kwargs)
        self.reference.update(name, partition=partition, **kwargs)
        self.store.wait_until_consistent(name)

    def query(
        self, name: str, vector: Any, top_k: int, partition: Reach = EVERYWHERE, **kwargs: Any
    ) -> list[QueryResult]:
        """Query both and require the same answer; returns the backend's. The twin's
        calls reach the whole index unless a partition is named."""
        kwargs["partition"] = partition
        got = self.store.query(name, vector, top_k, **kwargs)
        expected = self.reference.query(name, vector, top_k, **kwargs)
        every = self.reference.query(name, vector, self.reference.capabilities.max_top_k, **kwargs)
        assert_same(got, expected, every, exact=self.capabilities.exact, what=_describe(kwargs))
        return got

    def get(self, name: str, ids: Sequence[str]) -> list[StoredVector]:
        """Read both by id and require the same records (vectors within float32's
        rounding); returns the backend's."""
        got = self.store.get(name, ids)
        expected = self.reference.get(name, ids)
        assert [(v.id, v.metadata) for v in got] == [(v.id, v.metadata) for v in expected]
        for mine, theirs in zip(got, expected, strict=True):
            assert np.allclose(mine.vector, theirs.vector, rtol=1e-5, atol=1e-6), mine.id
        return got

    def check_filter(
        self, name: str, vector: Any, top_k: int, filter: Any, partition: Reach = EVERYWHERE
    ) -> None:
        """A declared operator must agree with the reference; an undeclared one must raise."""
        refused = self.capabilities.unsupported(parse_filter(filter))
        if refused is None:
            self.query(name, vector, top_k, filter=filter, partition=partition)
            return
        try:
            self.store.query(name, vector, top_k, filter=filter, partition=partition)
        except UnsupportedFilterError as exc:
            assert exc.operator == refused, f"raised for {exc.operator}, expected {refused}"
            self._record_unsupported(exc.operator)
            return
        raise AssertionError(
            f"{self.store.backend} does not support {refused} but accepted filter {filter!r}"
        )

    def record_refused(self, what: str) -> None:
        """Note in the report that the backend refuses `what` with the documented error
        (the case has just checked that it does)."""
        self._record_unsupported(what)

    def cleanup(self) -> None:
        existing = set(self.store.list_indexes())
        for name in self.created:
            if name in existing:
                self.store.delete_index(name)


def _describe(kwargs: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in kwargs.items() if v is not None}
    return f"query({shown})" if shown else "query()"


def assert_same(
    got: list[QueryResult],
    expected: list[QueryResult],
    every: list[QueryResult],
    *,
    exact: bool,
    what: str,
) -> None:
    """Same ids, order, scores and metadata as the reference (near-ties may swap places)."""
    truth = {r.id: r for r in every}
    for r in got:
        assert r.id in truth, f"{what}: returned {r.id!r}, which the reference does not match"
        assert abs(r.score - truth[r.id].score) <= SCORE_TOLERANCE, (
            f"{what}: score of {r.id!r} is {r.score}, the reference says {truth[r.id].score}"
        )
        assert _typed(r.metadata) == _typed(truth[r.id].metadata), (
            f"{what}: metadata of {r.id!r} is {r.metadata!r}, "
            f"the reference says {truth[r.id].metadata!r}"
        )
    got_ids = [r.id for r in got]
    expected_ids = [r.id for r in expected]
    if not exact:
        found = len(set(got_ids) & set(expected_ids)) / len(expected_ids) if expected_ids else 1.0
        assert found >= RECALL_TOLERANCE, (
            f"{what}: recall {found:.2f} < {RECALL_TOLERANCE}; "
            f"got {got_ids}, expected {expected_ids}"
        )
        return
    assert len(got) == len(expected), (
        f"{what}: {len(got)} results, the reference gives {len(expected)}:\n"
        f"  got      {got_ids}\n  expected {expected_ids}"
    )
    got_scores = np.array([r.score for r in got])
    expected_scores = np.array([r.score for r in expected])
    if got_ids != expected_ids:
        assert np.allclose(got_scores, expected_scores, atol=SCORE_TOLERANCE, rtol=0), (
            f"{what}: wrong results or order:\n  got      {got_ids}\n  expected {expected_ids}"
        )


def _typed(value: Any) -> Any:
    """A value with its types made part of equality: 1, 1.0 and True are told apart."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)
