"""Group 3: threshold (`min_score`) is inclusive and portable."""

from __future__ import annotations

import pytest

from recallstack.conformance.dataset import vectors
from recallstack.conformance.twin import Twin
from recallstack.core.vectors import EVERYWHERE, METRICS, Metric


@pytest.mark.parametrize("metric", METRICS)
def test_threshold_is_inclusive_at_a_result_score(twin: Twin, metric: Metric) -> None:
    name = twin.metric_index(6, metric)
    if name is None:
        return
    data = vectors(30, 6, seed=11)
    twin.upsert(name, [f"v{i:02d}" for i in range(30)], data)
    query = vectors(1, 6, seed=12)[0]
    ranked = twin.store.query(name, query, 30, partition=EVERYWHERE)
    cut = ranked[9].score
    kept = twin.store.query(name, query, 30, min_score=cut, partition=EVERYWHERE)
    assert [r.id for r in kept] == [r.id for r in ranked if r.score >= cut]
    assert ranked[9].id in {r.id for r in kept}
    assert all(r.score >= cut for r in kept)


def test_fewer_than_top_k_when_fewer_pass(twin: Twin) -> None:
    name = twin.index(3)
    twin.upsert(name, ["a", "b", "c"], [[1, 0, 0], [1, 1, 0], [0, 1, 0]])
    results = twin.query(name, [1, 0, 0], 3, min_score=0.5)
    assert [r.id for r in results] == ["a", "b"]
    assert twin.query(name, [1, 0, 0], 3, min_score=1.01) == []


def test_threshold_with_a_filter(twin: Twin) -> None:
    name = twin.index(3)
    twin.upsert(
        name,
        ["a", "b", "c"],
        [[1, 0, 0], [1, 1, 0], [1, 0.1, 0]],
        [{"k": 1}, {"k": 1}, {"k": 2}],
    )
    assert [r.id for r in twin.query(name, [1, 0, 0], 3, min_score=0.5, filter={"k": 1})] == [
        "a",
        "b",
    ]
