"""Group 4: every operator, alone and combined, against the reference evaluator."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallstack.conformance.dataset import AWKWARD_KEY, DOCS, FILTERS, vectors
from recallstack.conformance.twin import Twin
from recallstack.core.filters import REQUIRED_OPERATORS

QUERY = vectors(1, 8, seed=99)[0]


@pytest.fixture
def docs_index(twin: Twin) -> str:
    name = twin.index(8)
    twin.upsert(name, [f"d{i:02d}" for i in range(len(DOCS))], vectors(len(DOCS), 8), DOCS)
    return name


@pytest.mark.parametrize("filter_", FILTERS, ids=[str(f) for f in FILTERS])
def test_filter(twin: Twin, docs_index: str, filter_: dict[str, Any]) -> None:
    twin.check_filter(docs_index, QUERY, len(DOCS), filter_)


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_filtered_top_k_is_the_true_top_k(twin: Twin, top_k: int) -> None:
    """A filter selecting few rows still yields top_k of them, never fewer."""
    name = twin.index(8)
    count = 300
    metadata = [{"bucket": "rare" if i % 60 == 0 else "common"} for i in range(count)]
    twin.upsert(name, [f"v{i:03d}" for i in range(count)], vectors(count, 8, seed=5), metadata)
    results = twin.query(name, QUERY, top_k, filter={"bucket": "rare"})
    assert len(results) == top_k


def test_datetime_values_compare_as_epoch_ms(twin: Twin) -> None:
    from datetime import UTC, datetime

    name = twin.index(2)
    days = [datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]
    twin.upsert(name, ["a", "b", "c"], [[1, 0], [1, 1], [0, 1]], [{"at": d} for d in days])
    twin.query(name, [1, 0], 3, filter={"at": {"$gte": days[1]}})
    twin.query(name, [1, 0], 3, filter={"at": days[0]})


# ---- the property-based differential test ------------------------------------------

KEYS = ["a", "b", "key with space", "quote'\"", "ünï"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, -2.5, 1.5]),
    st.sampled_from(["", "a", "b", "B", "ab", "é", "1", "'--", "$gt"]),
)
values = st.one_of(
    scalars,
    st.lists(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "c"])), max_size=3),
    st.fixed_dictionaries({}, optional={"x": scalars, "y": scalars}),
)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)
paths = st.sampled_from([*KEYS, "a.x", "b.y"])
range_operands = st.one_of(st.integers(-3, 3), st.sampled_from([1.5, -0.5, "a", "b", "B", ""]))


def filters(operators: frozenset[str]) -> st.SearchStrategy[dict[str, Any]]:
    field_ops = sorted(operators - {"$and", "$or", "$nor", "$not"})

    @st.composite
    def condition(draw: st.DrawFn) -> dict[str, Any]:
        op = draw(st.sampled_from(field_ops))
        if op in ("$gt", "$gte", "$lt", "$lte"):
            operand: Any = draw(range_operands)
        elif op in ("$in", "$nin", "$all"):
            operand = draw(st.lists(scalars, max_size=3))
        elif op == "$exists":
            operand = draw(st.booleans())
        else:
            operand = draw(scalars)
        body = {op: operand}
        if "$not" in operators and draw(st.booleans()):
            body = {"$not": body}
        return {draw(paths): body}

    logical = sorted(operators & {"$and", "$or", "$nor"})
    return st.recursive(
        condition(),
        lambda inner: st.builds(
            lambda op, children: {op: children},
            st.sampled_from(logical),
            st.lists(inner, min_size=1, max_size=3),
        ),
        max_leaves=5,
    )


def test_differential(twin: Twin) -> None:
    """Random documents and filters: the backend must select exactly what the reference does."""
    name = twin.index(4)
    declared = twin.capabilities.operators
    count = 16

    @settings(
        max_examples=200,
        derandomize=True,  # the same examples on every run: CI never flickers
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )
    @given(st.lists(documents, min_size=count, max_size=count), filters(declared))
    def check(docs: list[dict[str, Any]], filter_: dict[str, Any]) -> None:
        twin.upsert(name, [f"r{i:02d}" for i in range(count)], vectors(count, 4, seed=1), docs)
        twin.check_filter(name, QUERY[:4], count, filter_)

    check()


def test_required_operators_are_declared(twin: Twin) -> None:
    assert twin.capabilities.operators >= REQUIRED_OPERATORS


def test_awkward_key_round_trips(twin: Twin, docs_index: str) -> None:
    (hit,) = twin.query(docs_index, QUERY, 5, filter={AWKWARD_KEY: "'; DROP TABLE x; --"})
    assert hit.metadata[AWKWARD_KEY] == "'; DROP TABLE x; --"
