"""The reference vector store honours every method and error of docs/spec/backends.md §2 and §3."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.errors import (
    BackendError,
    DimensionMismatchError,
    FilterError,
    IndexNotFoundError,
    InvalidInputError,
)
from recallstack.core.scores import past_ties, score
from recallstack.core.vectors import EVERYWHERE, IndexStats, QueryResult


@pytest.fixture
def store() -> InMemoryVectorStore:
    s = InMemoryVectorStore()
    s.create_index("idx", 3)
    s.upsert(
        "idx",
        ["a", "b", "c"],
        [[1, 0, 0], [0, 1, 0], [1, 1, 0]],
        [{"k": 1}, {"k": 2}, {"k": 3, "tags": ["x"]}],
        partition=EVERYWHERE,
    )
    return s


def test_create_index_is_idempotent_and_checks_dimension(store: InMemoryVectorStore) -> None:
    store.create_index("idx", 3)
    assert store.describe_index("idx") == IndexStats(dimension=3, count=3, metric="cosine")
    with pytest.raises(DimensionMismatchError, match="expected dimension 3, got 4"):
        store.create_index("idx", 4)
    with pytest.raises(InvalidInputError):
        store.create_index("bad", 0)
    with pytest.raises(InvalidInputError, match="dimension must be a positive int"):
        store.create_index("bad", True)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        store.create_index("", 3)


def test_list_describe_delete(store: InMemoryVectorStore) -> None:
    store.create_index("other", 2, metric="euclidean")
    assert store.list_indexes() == ["idx", "other"]
    assert store.describe_index("other").metric == "euclidean"
    store.delete_index("other")
    assert store.list_indexes() == ["idx"]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.describe_index("nope"),
        lambda s: s.delete_index("nope"),
        lambda s: s.upsert("nope", ["a"], [[1, 0, 0]], partition=EVERYWHERE),
        lambda s: s.query("nope", [1, 0, 0], partition=EVERYWHERE),
        lambda s: s.update("nope", id="a", metadata={}, partition=EVERYWHERE),
        lambda s: s.delete("nope", ids=["a"], partition=EVERYWHERE),
    ],
)
def test_missing_index(store: InMemoryVectorStore, call: Any) -> None:
    with pytest.raises(IndexNotFoundError, match="'nope'"):
        call(store)


def test_query_scores_order_and_ties(store: InMemoryVectorStore) -> None:
    results = store.query("idx", [1, 0, 0], top_k=10, partition=EVERYWHERE)
    assert [r.id for r in results] == ["a", "c", "b"]
    assert results[0].score == pytest.approx(1.0)
    assert results[1].score == pytest.approx(1 / math.sqrt(2))
    assert results[2].score == pytest.approx(0.0)
    store.upsert("idx", ["a2"], [[2, 0, 0]], partition=EVERYWHERE)
    assert [r.id for r in store.query("idx", [1, 0, 0], top_k=2, partition=EVERYWHERE)] == [
        "a",
        "a2",
    ]
    assert store.query("idx", [1, 0, 0], top_k=1, include_vector=True, partition=EVERYWHERE)[
        0
    ].vector == [1, 0, 0]
    assert store.query("idx", [1, 0, 0], top_k=1, partition=EVERYWHERE)[0].vector is None


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("cosine", {"p": 1.0, "q": 1 / math.sqrt(2), "r": 0.0}),
        ("euclidean", {"p": 1.0, "q": 1 / (1 + math.sqrt(2)), "r": 1 / (1 + math.sqrt(5))}),
        ("dotproduct", {"p": 4.0, "q": 2.0, "r": 0.0}),
    ],
)
def test_score_convention(metric: Any, expected: dict[str, float]) -> None:
    s = InMemoryVectorStore()
    s.create_index("m", 2, metric=metric)
    s.upsert("m", ["p", "q", "r"], [[2, 0], [1, 1], [0, 1]], partition=EVERYWHERE)
    assert {r.id: r.score for r in s.query("m", [2, 0], 3, partition=EVERYWHERE)} == pytest.approx(
        expected
    )


def test_a_cosine_never_passes_one() -> None:
    """A unit vector's cosine with itself rounds above 1 in about a third of cases
    (float32 products); scores stay in [-1, 1], so LangChain's relevance stays in [0, 1]."""
    rows = np.random.default_rng(0).standard_normal((500, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    for i, row in enumerate(rows):
        scores = score(rows, row, "cosine")
        assert scores[i] == 1.0 or 1.0 - 1e-6 < scores[i] < 1.0
        assert score(rows, -row, "cosine")[i] >= -1.0


def test_a_store_s_cosine_scores_are_held_to_one() -> None:
    """Whatever an engine answers, a cosine index's scores reach callers within [-1, 1]."""

    class Rounding(InMemoryVectorStore):
        """Rounds "b" a little further past ±1 than "a", so it comes first."""

        def _query(self, *args: Any) -> list[QueryResult]:
            rounded = [
                h.model_copy(update={"score": h.score * (1.0000002 if "b" in h.id else 1.0000001)})
                for h in super()._query(*args)
            ]
            return sorted(rounded, key=lambda h: -h.score)

    store = Rounding()
    store.create_index("i", 2)
    store.upsert(
        "i", ["a", "b", "a-", "b-"], [[1, 0], [1, 0], [-1, 0], [-1, 0]], partition=EVERYWHERE
    )
    assert [(h.id, h.score) for h in store.query("i", [1, 0], 4, partition=EVERYWHERE)] == [
        ("a", 1.0),
        ("b", 1.0),  # tied once held to 1: by id
        ("a-", -1.0),
        ("b-", -1.0),
    ]
    store.create_index("d", 2, metric="dotproduct")
    store.upsert("d", ["a"], [[1, 0]], partition=EVERYWHERE)
    assert store.query("d", [1, 0], 1, partition=EVERYWHERE)[0].score == 1.0000001


def test_threshold_is_inclusive(store: InMemoryVectorStore) -> None:
    exact = store.query("idx", [1, 0, 0], top_k=3, partition=EVERYWHERE)[1].score
    assert [
        r.id for r in store.query("idx", [1, 0, 0], 3, min_score=exact, partition=EVERYWHERE)
    ] == ["a", "c"]
    assert store.query("idx", [1, 0, 0], 3, min_score=1.5, partition=EVERYWHERE) == []


def test_filtered_query_and_overwrite(store: InMemoryVectorStore) -> None:
    assert [
        r.id
        for r in store.query("idx", [1, 0, 0], 3, filter={"k": {"$gte": 2}}, partition=EVERYWHERE)
    ] == ["c", "b"]
    store.upsert("idx", ["b"], [[1, 0, 0]], [{"k": 9}], partition=EVERYWHERE)
    assert store.describe_index("idx").count == 3
    top = store.query("idx", [1, 0, 0], 1, filter={"k": 9}, partition=EVERYWHERE)
    assert [(r.id, r.metadata) for r in top] == [("b", {"k": 9})]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((["a", "b"], [[1, 0, 0]]), InvalidInputError, "2 ids but 1 vectors"),
        (([], []), InvalidInputError, "empty"),
        ((["a"], [[1, 0, 0]], [{}, {}]), InvalidInputError, "1 ids but 2 metadata"),
        ((["z"], [[1, float("nan"), 0]]), InvalidInputError, "NaN"),
        ((["z"], [[1, float("inf"), 0]]), InvalidInputError, "infinite"),
        ((["z"], [[1, 0]]), DimensionMismatchError, "expected dimension 3, got 2"),
        ((["z"], [[0, 0, 0]]), InvalidInputError, "zero vector"),
        ((["y", "z"], np.array([[1, 0, 0], [0, 0, 0]])), InvalidInputError, "vectors[1]: a zero"),
        (
            (["y", "z"], [[1, 0, 0], [1, np.inf, 0]]),
            InvalidInputError,
            "vectors[1]: the vector has",
        ),
        ((["y", "z"], [[1, 0, 0], [1, 0]]), DimensionMismatchError, "vectors[1]"),
        ((["y", "z"], [[1, 0, 0], ["x", 0, 0]]), InvalidInputError, "vectors[1]: the vector is"),
        ((["z", "z"], [[1, 0, 0], [1, 0, 0]]), InvalidInputError, "repeats"),
        ((["z", ""], [[1, 0, 0], [1, 0, 0]]), InvalidInputError, "ids[1]"),
        ((["z", 3], [[1, 0, 0], [1, 0, 0]]), InvalidInputError, "ids[1]: ids must be"),
        ((["y", "z"], [[1e25, 0, 0], [1, np.nan, 0]]), InvalidInputError, "vectors[1]: the"),
        ((["z"], [[1, 0, 0]], [{"a": {"b": float("nan")}}]), InvalidInputError, "[0].a.b: nan"),
        ((["z"], [[1, 0, 0]], [{"$bad": 1}]), InvalidInputError, "metadata[0]"),
        ((["z"], [[1, 0, 0]], [{"a.b": 1}]), InvalidInputError, "contain '.'"),
        ((["z"], [[1, 0, 0]], [{"a": [{"x": 1}]}]), InvalidInputError, "metadata[0].a[0]"),
        (("z", [[1, 0, 0]]), InvalidInputError, "not one string"),
    ],
)
def test_bad_upserts_change_nothing(
    store: InMemoryVectorStore, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    before = store.query("idx", [1, 0, 0], 10, include_vector=True, partition=EVERYWHERE)
    with pytest.raises(error) as err:
        store.upsert("idx", *args, partition=EVERYWHERE)
    assert message in str(err.value)
    assert store.query("idx", [1, 0, 0], 10, include_vector=True, partition=EVERYWHERE) == before


@pytest.mark.parametrize("size", [1e25, 1e-30])
def test_extreme_but_finite_vectors_are_valid(store: InMemoryVectorStore, size: float) -> None:
    """Squaring these overflows or underflows float32: the query check must look closer."""
    store.upsert("idx", ["far"], [[size, 0, 0]], partition=EVERYWHERE)
    assert store.describe_index("idx").count == 4
    store.query("idx", [size, 0, 0], 1, partition=EVERYWHERE)  # accepted
    with pytest.raises(InvalidInputError, match="infinite"):
        store.query("idx", [size, np.inf, 0], 1, partition=EVERYWHERE)
    with pytest.raises(InvalidInputError, match="zero vector"):
        store.query("idx", [0, 0, 0], 1, partition=EVERYWHERE)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"vector": [1, 0], "top_k": 1}, DimensionMismatchError),
        ({"vector": [1, 0, 0], "top_k": 0}, InvalidInputError),
        ({"vector": [1, 0, 0], "top_k": -1}, InvalidInputError),
        ({"vector": [1, 0, 0], "top_k": True}, InvalidInputError),
        ({"vector": [1, 0, 0], "top_k": 2.0}, InvalidInputError),
        ({"vector": [1, 0, 0], "top_k": 1, "filter": {"k": {"$bad": 1}}}, FilterError),
        ({"vector": [np.nan, 0, 0], "top_k": 1}, InvalidInputError),
        ({"vector": [1, 0, 0], "top_k": 1, "min_score": float("nan")}, InvalidInputError),
    ],
)
def test_bad_queries(store: InMemoryVectorStore, kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        store.query("idx", **kwargs, partition=EVERYWHERE)


def test_datetime_metadata_is_epoch_ms() -> None:
    from datetime import UTC, datetime

    s = InMemoryVectorStore()
    s.create_index("t", 2)
    s.upsert(
        "t",
        ["x"],
        [[1, 0]],
        [{"at": datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)}],
        partition=EVERYWHERE,
    )
    (hit,) = s.query(
        "t",
        [1, 0],
        1,
        filter={"at": {"$gte": datetime(1970, 1, 1, tzinfo=UTC)}},
        partition=EVERYWHERE,
    )
    assert hit.metadata == {"at": 1000}


def test_update_by_id_and_filter(store: InMemoryVectorStore) -> None:
    store.update("idx", id="a", metadata={"k": 10}, partition=EVERYWHERE)
    store.update("idx", id="unknown", metadata={"k": 0}, partition=EVERYWHERE)  # no-op
    store.update("idx", filter={"k": {"$gte": 3}}, vector=[0, 0, 1], partition=EVERYWHERE)
    results = {
        r.id: r for r in store.query("idx", [0, 0, 1], 3, include_vector=True, partition=EVERYWHERE)
    }
    assert results["a"].metadata == {"k": 10}
    assert results["a"].vector == [0, 0, 1]
    assert results["c"].vector == [0, 0, 1]
    assert results["b"].vector == [0, 1, 0]
    assert store.describe_index("idx").count == 3


def test_delete_by_ids_and_filter(store: InMemoryVectorStore) -> None:
    store.delete("idx", ids=["a", "unknown"], partition=EVERYWHERE)
    store.delete("idx", filter={"tags": "x"}, partition=EVERYWHERE)
    store.delete("idx", filter={"k": 404}, partition=EVERYWHERE)  # no-op
    assert [r.id for r in store.query("idx", [1, 1, 0], 10, partition=EVERYWHERE)] == ["b"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.delete("idx", partition=EVERYWHERE), "exactly one"),
        (
            lambda s: s.delete("idx", ids=["a"], filter={"k": 1}, partition=EVERYWHERE),
            "exactly one",
        ),
        (lambda s: s.delete("idx", ids=[], partition=EVERYWHERE), "non-empty"),
        (lambda s: s.delete("idx", filter={}, partition=EVERYWHERE), "empty filter"),
        (lambda s: s.update("idx", id="a", partition=EVERYWHERE), "vector, metadata"),
        (
            lambda s: s.update("idx", id="a", filter={"k": 1}, metadata={}, partition=EVERYWHERE),
            "exactly one",
        ),
        (lambda s: s.update("idx", filter={}, metadata={}, partition=EVERYWHERE), "empty filter"),
        (
            lambda s: s.update("idx", id="a", vector=[1, 2], partition=EVERYWHERE),
            "expected dimension 3",
        ),
    ],
)
def test_update_delete_errors(store: InMemoryVectorStore, call: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        call(store)
    assert store.describe_index("idx").count == 3


def test_past_ties_asks_again_while_the_extra_hit_ties() -> None:
    """The ANN fetch rule of pg, Qdrant and Chroma: top_k + 1, then four times more."""
    ranked_scores = [0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.6]
    asked: list[int] = []

    def search(n: int) -> list[float]:
        asked.append(n)
        return ranked_scores[:n]

    assert list(past_ties(search, 2, lambda s: s)) == ranked_scores[:8]
    assert asked == [3, 12]  # 3 ends in a tie at the cut; 12 is past the end
    asked.clear()
    assert list(past_ties(search, 1, lambda s: s)) == [0.9, 0.8]
    assert asked == [2]  # no tie at the cut: one search


class _FailingDriver(InMemoryVectorStore):
    """A store whose driver fails, as a network or engine error would."""

    driver_errors = (ConnectionError,)

    def _query(self, *args: Any) -> Any:
        raise ConnectionError("connection reset by peer")

    def _upsert(self, *args: Any) -> Any:
        raise KeyError("a bug, not the driver")


def test_driver_errors_become_backend_errors_and_nothing_else_does() -> None:
    store = _FailingDriver()
    store.create_index("idx", 2)
    with pytest.raises(BackendError, match="memory: connection reset by peer") as err:
        store.query("idx", [1, 0], 1, partition=EVERYWHERE)
    assert isinstance(err.value.__cause__, ConnectionError)
    with pytest.raises(IndexNotFoundError):  # recallstack's own errors pass unchanged
        store.query("missing", [1, 0], 1, partition=EVERYWHERE)
    with pytest.raises(KeyError):  # what the driver does not raise is not dressed up
        store.upsert("idx", ["a"], [[1, 0]], partition=EVERYWHERE)
