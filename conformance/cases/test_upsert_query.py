"""Group 2: upsert, query and read by id; scores per metric, ties."""

from __future__ import annotations

import numpy as np
import pytest

from recallstack.conformance.dataset import vectors
from recallstack.conformance.twin import Twin
from recallstack.core.vectors import EVERYWHERE, METRICS, Metric


def test_single_and_batch_upsert(twin: Twin) -> None:
    name = twin.index(16)
    data = vectors(1000, 16)
    twin.upsert(name, ["single"], data[:1])
    twin.upsert(name, [f"v{i:04d}" for i in range(1000)], data)
    assert twin.store.describe_index(name).count == 1001
    for row in (0, 500, 999):
        twin.query(name, data[row], 10)


def test_overwrite_keeps_the_count(twin: Twin) -> None:
    name = twin.index(3)
    twin.upsert(name, ["a", "b"], [[1, 0, 0], [0, 1, 0]], [{"v": 1}, {"v": 1}])
    twin.upsert(name, ["a"], [[0, 0, 1]], [{"v": 2}])
    assert twin.store.describe_index(name).count == 2
    (top,) = twin.query(name, [0, 0, 1], 1)
    assert (top.id, top.metadata) == ("a", {"v": 2})


@pytest.mark.parametrize("top_k", [1, 10, 50])
def test_top_k_is_respected(twin: Twin, top_k: int) -> None:
    name = twin.index(8)
    twin.upsert(name, [f"v{i}" for i in range(20)], vectors(20, 8))
    results = twin.query(name, vectors(1, 8, seed=1)[0], top_k)
    assert len(results) == min(top_k, 20)
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


def test_include_vector(twin: Twin) -> None:
    name = twin.index(4)
    data = vectors(3, 4)
    twin.upsert(name, ["a", "b", "c"], data)
    with_vectors = twin.store.query(name, data[0], 3, include_vector=True, partition=EVERYWHERE)
    for r in with_vectors:
        assert r.vector is not None
        assert np.allclose(r.vector, data[["a", "b", "c"].index(r.id)], atol=1e-6)
    assert all(r.vector is None for r in twin.store.query(name, data[0], 3, partition=EVERYWHERE))


@pytest.mark.parametrize("metric", METRICS)
def test_scores_match_the_reference(twin: Twin, metric: Metric) -> None:
    name = twin.metric_index(12, metric)
    if name is None:
        return
    data = vectors(200, 12, seed=3)
    twin.upsert(name, [f"v{i:03d}" for i in range(200)], data)
    for seed in range(5):
        twin.query(name, vectors(1, 12, seed=100 + seed)[0], 10)


def test_ties_are_ordered_by_id(twin: Twin) -> None:
    name = twin.index(3)
    same = [1.0, 2.0, 3.0]
    twin.upsert(name, ["c", "a", "d", "b"], [same, same, same, [3.0, 2.0, 1.0]])
    results = twin.store.query(name, same, 4, partition=EVERYWHERE)
    assert [r.id for r in results] == ["a", "c", "d", "b"]
    assert [r.id for r in twin.store.query(name, same, 2, partition=EVERYWHERE)] == ["a", "c"]


def test_get_reads_vectors_and_metadata_by_id(twin: Twin) -> None:
    name = twin.index(6)
    data = vectors(5, 6, seed=4) * 7.0  # not unit length: a store that normalises gives it back
    ids = ["a", "b", "c", "d", "e"]
    metadata = [{"n": i, "tag": f"t{i}", "at": 1_700_000_000_000 + i} for i in range(5)]
    twin.upsert(name, ids, data, metadata)
    got = twin.get(name, ["d", "missing", "a", "d"])
    assert [v.id for v in got] == ["d", "a"]  # the order asked, once each, the missing left out
    assert got[0].metadata == {"n": 3, "tag": "t3", "at": 1_700_000_000_003}
    assert type(got[0].metadata["at"]) is int
    twin.update(name, id="a", metadata={"n": 9})
    twin.delete(name, ids=["d"])
    assert [(v.id, v.metadata) for v in twin.get(name, ["a", "d"])] == [("a", {"n": 9})]


@pytest.mark.parametrize("metric", METRICS)
def test_get_gives_back_what_was_stored_under_every_metric(twin: Twin, metric: Metric) -> None:
    name = twin.metric_index(8, metric)
    if name is None:
        return
    data = vectors(10, 8, seed=5) * 3.0
    twin.upsert(name, [f"v{i}" for i in range(10)], data)
    for v in twin.get(name, [f"v{i}" for i in range(10)]):
        assert np.allclose(v.vector, data[int(v.id[1:])], rtol=1e-5, atol=1e-6)


def test_get_reads_more_ids_than_a_filter_holds(twin: Twin) -> None:
    name = twin.index(4)
    count = twin.capabilities.max_filter_values + 500
    ids = [f"v{i:05d}" for i in range(count)]
    twin.upsert(name, ids, vectors(count, 4, seed=6), [{"i": i} for i in range(count)])
    wanted = ids[::-1]
    got = twin.get(name, wanted)
    assert [v.id for v in got] == wanted
