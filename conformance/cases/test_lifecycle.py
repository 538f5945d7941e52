"""Group 1: index lifecycle."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from recallstack.conformance.twin import Twin
from recallstack.core.errors import DimensionMismatchError, IndexNotFoundError
from recallstack.core.vectors import EVERYWHERE, METRICS, IndexStats, Metric


def test_create_is_idempotent(twin: Twin) -> None:
    name = twin.index(4)
    twin.store.create_index(name, 4)
    assert twin.store.describe_index(name) == IndexStats(dimension=4, count=0, metric="cosine")


def test_create_with_another_dimension_fails(twin: Twin) -> None:
    name = twin.index(4)
    with pytest.raises(DimensionMismatchError) as err:
        twin.store.create_index(name, 5)
    assert "4" in str(err.value) and "5" in str(err.value)


@pytest.mark.parametrize("metric", METRICS)
def test_describe_reports_the_metric(twin: Twin, metric: Metric) -> None:
    name = twin.metric_index(3, metric)
    if name is None:
        return
    twin.upsert(name, ["a", "b"], [[1, 0, 0], [0, 1, 0]])
    assert twin.store.describe_index(name) == IndexStats(dimension=3, count=2, metric=metric)


def test_list_and_delete(twin: Twin) -> None:
    first, second = twin.index(2), twin.index(2)
    listed = twin.store.list_indexes()
    assert {first, second} <= set(listed)
    twin.store.delete_index(first)
    listed = twin.store.list_indexes()
    assert first not in listed and second in listed


@pytest.mark.parametrize(
    "operation",
    ["describe_index", "delete_index", "upsert", "query", "update", "delete"],
)
def test_missing_index_fails(twin: Twin, operation: str) -> None:
    name = f"{twin.prefix}missing"
    calls: dict[str, Callable[[], object]] = {
        "describe_index": lambda: twin.store.describe_index(name),
        "delete_index": lambda: twin.store.delete_index(name),
        "upsert": lambda: twin.store.upsert(name, ["a"], [[1.0, 0.0]], partition=EVERYWHERE),
        "query": lambda: twin.store.query(name, [1.0, 0.0], 1, partition=EVERYWHERE),
        "update": lambda: twin.store.update(name, id="a", metadata={"x": 1}, partition=EVERYWHERE),
        "delete": lambda: twin.store.delete(name, ids=["a"], partition=EVERYWHERE),
    }
    with pytest.raises(IndexNotFoundError):
        calls[operation]()
