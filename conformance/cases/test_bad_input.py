"""Group 5: bad input gets its documented error and leaves the index unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from recallstack.conformance.twin import Twin
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import (
    DimensionMismatchError,
    FilterError,
    IndexNotFoundError,
    InvalidInputError,
)
from recallstack.core.vectors import EVERYWHERE

BAD_QUERIES: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("unknown operator", {"filter": {"k": {"$regex": "a"}}}, FilterError),
    ("operator at the wrong level", {"filter": {"$gt": 1}}, FilterError),
    ("logical operator inside a field", {"filter": {"k": {"$or": [{"a": 1}]}}}, FilterError),
    ("empty $and", {"filter": {"$and": []}}, FilterError),
    ("list given to $eq", {"filter": {"k": {"$eq": [1, 2]}}}, FilterError),
    ("object given to $eq", {"filter": {"k": {"a": 1}}}, FilterError),
    ("top_k of zero", {"top_k": 0}, InvalidInputError),
    ("negative top_k", {"top_k": -3}, InvalidInputError),
    ("wrong dimension", {"vector": [1.0, 0.0]}, DimensionMismatchError),
    ("NaN component", {"vector": [float("nan"), 0.0, 0.0]}, InvalidInputError),
    ("a partition that is a string", {"partition": "r1"}, InvalidInputError),
    ("no partition", {"partition": None}, InvalidInputError),
]

BAD_UPSERTS: list[tuple[str, Callable[[VectorStore, str], Any], type[Exception]]] = [
    (
        "NaN component",
        lambda s, n: s.upsert(n, ["x"], [[float("nan"), 0, 0]], partition=EVERYWHERE),
        InvalidInputError,
    ),
    (
        "inf component",
        lambda s, n: s.upsert(n, ["x"], [[float("inf"), 0, 0]], partition=EVERYWHERE),
        InvalidInputError,
    ),
    (
        "wrong dimension",
        lambda s, n: s.upsert(n, ["x"], [[1.0, 2.0]], partition=EVERYWHERE),
        DimensionMismatchError,
    ),
    (
        "ids/vectors length mismatch",
        lambda s, n: s.upsert(n, ["x", "y"], [[1.0, 0, 0]], partition=EVERYWHERE),
        InvalidInputError,
    ),
    (
        "ids/metadata length mismatch",
        lambda s, n: s.upsert(n, ["x"], [[1.0, 0, 0]], [{}, {}], partition=EVERYWHERE),
        InvalidInputError,
    ),
    ("empty batch", lambda s, n: s.upsert(n, [], [], partition=EVERYWHERE), InvalidInputError),
    (
        "one bad row among good ones",
        lambda s, n: s.upsert(n, ["x", "y"], [[1.0, 0, 0], [1.0, 0]], partition=EVERYWHERE),
        DimensionMismatchError,
    ),
    (
        "operator-looking metadata key",
        lambda s, n: s.upsert(n, ["x"], [[1.0, 0, 0]], [{"$where": "1"}], partition=EVERYWHERE),
        InvalidInputError,
    ),
]


BAD_GETS: list[tuple[str, Any, type[Exception]]] = [
    ("no ids", [], InvalidInputError),
    ("one string for a list", "a", InvalidInputError),
    ("an empty id", ["a", ""], InvalidInputError),
    ("a number for an id", ["a", 7], InvalidInputError),
]


@pytest.fixture
def seeded(twin: Twin) -> str:
    name = twin.index(3)
    twin.upsert(name, ["a", "b"], [[1, 0, 0], [0, 1, 0]], [{"k": 1}, {"k": 2}])
    return name


def _snapshot(twin: Twin, name: str) -> list[Any]:
    return twin.store.query(name, [1.0, 1.0, 1.0], 10, include_vector=True, partition=EVERYWHERE)


@pytest.mark.parametrize(("case", "kwargs", "error"), BAD_QUERIES, ids=[c[0] for c in BAD_QUERIES])
def test_bad_query(
    twin: Twin, seeded: str, case: str, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    args = {"vector": [1.0, 0.0, 0.0], "top_k": 2, "partition": EVERYWHERE, **kwargs}
    with pytest.raises(error):
        twin.store.query(seeded, **args)


@pytest.mark.parametrize(("case", "call", "error"), BAD_UPSERTS, ids=[c[0] for c in BAD_UPSERTS])
def test_bad_upsert_changes_nothing(
    twin: Twin, seeded: str, case: str, call: Any, error: type[Exception]
) -> None:
    before = _snapshot(twin, seeded)
    with pytest.raises(error):
        call(twin.store, seeded)
    assert _snapshot(twin, seeded) == before


@pytest.mark.parametrize(("case", "ids", "error"), BAD_GETS, ids=[c[0] for c in BAD_GETS])
def test_bad_get(twin: Twin, seeded: str, case: str, ids: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        twin.store.get(seeded, ids)


def test_get_from_a_missing_index(twin: Twin) -> None:
    with pytest.raises(IndexNotFoundError):
        twin.store.get(f"{twin.prefix}never_made", ["a"])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("k'; DROP TABLE x; --", "'; DROP TABLE x; --"),
        ('k") OR 1=1 --', '") OR 1=1 --'),
        ("k$[0]", "$.k"),
        ("k\"]->>'a", '{"$gt": ""}'),
        ("k%' OR '%'='", "%' OR '%'='"),
    ],
)
def test_injection_is_literal(twin: Twin, seeded: str, key: str, value: str) -> None:
    twin.upsert(seeded, ["evil"], [[0, 0, 1]], [{"k": value, key: 1}])
    assert [r.id for r in twin.query(seeded, [1, 0, 0], 10, filter={"k": value})] == ["evil"]
    assert [r.id for r in twin.query(seeded, [1, 0, 0], 10, filter={key: 1})] == ["evil"]
    assert twin.store.describe_index(seeded).count == 3
    assert twin.query(seeded, [1, 0, 0], 10, filter={"k": {"$in": [1, 2]}})
