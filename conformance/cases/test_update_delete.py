"""Group 6: update and delete by ids and by filter."""

from __future__ import annotations

import pytest

from recallstack.conformance.twin import Twin
from recallstack.core.errors import InvalidInputError
from recallstack.core.vectors import EVERYWHERE


@pytest.fixture
def seeded(twin: Twin) -> str:
    name = twin.index(3)
    twin.upsert(
        name,
        ["a", "b", "c", "d"],
        [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]],
        [{"k": 1}, {"k": 2}, {"k": 2, "t": "x"}, {}],
    )
    return name


def test_update_metadata_by_id(twin: Twin, seeded: str) -> None:
    twin.update(seeded, id="a", metadata={"k": 9, "new": True})
    (hit,) = twin.query(seeded, [1, 0, 0], 1, filter={"k": 9})
    assert (hit.id, hit.metadata) == ("a", {"k": 9, "new": True})


def test_update_vector_by_id(twin: Twin, seeded: str) -> None:
    twin.update(seeded, id="b", vector=[1, 0, 0.01])
    results = twin.query(seeded, [1, 0, 0], 4, include_vector=True)
    assert [r.id for r in results][:2] == ["a", "b"]
    assert results[1].metadata == {"k": 2}


def test_update_by_filter(twin: Twin, seeded: str) -> None:
    twin.update(seeded, filter={"k": 2}, metadata={"k": 3})
    assert {r.id for r in twin.query(seeded, [1, 1, 1], 4, filter={"k": 3})} == {"b", "c"}


def test_delete_by_ids_and_filter(twin: Twin, seeded: str) -> None:
    twin.delete(seeded, ids=["a"])
    twin.delete(seeded, filter={"t": "x"})
    assert twin.store.describe_index(seeded).count == 2
    assert {r.id for r in twin.query(seeded, [1, 1, 1], 4)} == {"b", "d"}


def test_unknown_ids_and_no_match_are_no_ops(twin: Twin, seeded: str) -> None:
    twin.update(seeded, id="ghost", metadata={"k": 0})
    twin.delete(seeded, ids=["ghost"])
    twin.delete(seeded, filter={"k": 404})
    twin.update(seeded, filter={"k": 404}, metadata={"k": 0})
    assert twin.store.describe_index(seeded).count == 4
    twin.query(seeded, [1, 1, 1], 4)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, n: s.delete(n, partition=EVERYWHERE), "exactly one"),
        (lambda s, n: s.delete(n, ids=["a"], filter={"k": 1}, partition=EVERYWHERE), "exactly one"),
        (lambda s, n: s.delete(n, ids=[], partition=EVERYWHERE), "non-empty"),
        (lambda s, n: s.delete(n, filter={}, partition=EVERYWHERE), "empty filter"),
        (
            lambda s, n: s.update(n, id="a", filter={"k": 1}, metadata={}, partition=EVERYWHERE),
            "exactly one",
        ),
        (
            lambda s, n: s.update(n, filter={}, metadata={"k": 0}, partition=EVERYWHERE),
            "empty filter",
        ),
        (lambda s, n: s.update(n, id="a", partition=EVERYWHERE), "vector, metadata"),
    ],
)
def test_rejected(twin: Twin, seeded: str, call: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        call(twin.store, seeded)  # type: ignore[operator]
    assert twin.store.describe_index(seeded).count == 4
