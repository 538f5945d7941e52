"""The filter language: every operator row, shape rule and error of docs/spec/backends.md §5."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from operator import ge, gt, le, lt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.errors import FilterError
from recallstack.core.filters import (
    ALL_OPERATORS,
    MISSING,
    Condition,
    Logical,
    Not,
    and_filters,
    matches,
    operators_in,
    parse_filter,
    resolve,
)

DOCS: dict[str, dict[str, Any]] = {
    "int": {"n": 5},
    "float": {"n": 5.0},
    "half": {"n": 2.5},
    "str": {"n": "5", "s": "b"},
    "bool": {"n": True},
    "null": {"n": None},
    "list": {"n": [1, "x", None], "tags": ["a", "b"]},
    "missing": {"other": 1},
    "nested": {"a": {"b": {"c": 3}}, "n": {"x": 1}},
    "spaces": {"key with 'quotes' and \"dq\" -- )": "v; DROP TABLE x"},
}


def hits(doc: dict[str, Any]) -> set[str]:
    node = parse_filter(doc)
    return {name for name, meta in DOCS.items() if matches(node, meta)}


@pytest.mark.parametrize(
    ("filter_", "expected"),
    [
        # $eq: equality, list membership, None matches missing, int/float, bool is not a number
        ({"n": 5}, {"int", "float"}),
        ({"n": {"$eq": 5.0}}, {"int", "float"}),
        ({"n": "x"}, {"list"}),
        ({"n": None}, {"null", "list", "missing", "spaces"}),
        ({"n": True}, {"bool"}),
        ({"n": 1}, {"list"}),
        # $ne: the complement of $eq
        ({"n": {"$ne": 5}}, set(DOCS) - {"int", "float"}),
        ({"n": {"$ne": None}}, {"int", "float", "half", "str", "bool", "nested"}),
        ({"n": {"$ne": "x"}}, set(DOCS) - {"list"}),
        # ranges: same kind only, any list element, missing never matches
        ({"n": {"$gt": 2.5}}, {"int", "float"}),
        ({"n": {"$gte": 2.5}}, {"int", "float", "half"}),
        ({"n": {"$lt": 5}}, {"half", "list"}),
        ({"n": {"$lte": 5}}, {"int", "float", "half", "list"}),
        ({"n": {"$gt": 0}}, {"int", "float", "half", "list"}),
        ({"n": {"$gte": "5"}}, {"str", "list"}),
        ({"s": {"$gt": "a"}}, {"str"}),
        ({"s": {"$lt": "a"}}, set()),
        ({"n": {"$gt": 1, "$lt": 5}}, {"half"}),
        # $in / $nin
        ({"n": {"$in": [5, "5"]}}, {"int", "float", "str"}),
        ({"n": {"$in": []}}, set()),
        ({"n": {"$in": [None]}}, {"null", "list", "missing", "spaces"}),
        ({"tags": {"$in": ["b", "z"]}}, {"list"}),
        ({"n": {"$nin": [5, "5"]}}, set(DOCS) - {"int", "float", "str"}),
        ({"n": {"$nin": []}}, set(DOCS)),
        # logical operators
        ({"$and": [{"n": {"$gt": 1}}, {"n": {"$lt": 5}}]}, {"half"}),
        ({"$or": [{"n": 5}, {"s": "b"}]}, {"int", "float", "str"}),
        ({"$nor": [{"n": 5}, {"n": None}]}, {"half", "str", "bool", "nested"}),
        ({"n": {"$not": {"$gt": 2.5}}}, set(DOCS) - {"int", "float"}),
        ({"n": 5, "other": {"$exists": False}}, {"int", "float"}),
        # $exists: null counts as present
        ({"n": {"$exists": True}}, set(DOCS) - {"missing", "spaces"}),
        ({"n": {"$exists": False}}, {"missing", "spaces"}),
        # $all
        ({"tags": {"$all": ["a", "b"]}}, {"list"}),
        ({"tags": {"$all": ["a", "z"]}}, set()),
        ({"n": {"$all": [5]}}, {"int", "float"}),
        ({"n": {"$all": []}}, set()),
        # nested dot paths, and an object value is never equal to a scalar
        ({"a.b.c": 3}, {"nested"}),
        ({"a.b.c": {"$gte": 3}}, {"nested"}),
        ({"a.b": {"$exists": True}}, {"nested"}),
        ({"n.x": 1}, {"nested"}),
        ({"a.b.c.d": {"$exists": True}}, set()),
        # keys and values with punctuation are literal
        ({"key with 'quotes' and \"dq\" -- )": "v; DROP TABLE x"}, {"spaces"}),
        ({"n": "$gt"}, set()),
    ],
)
def test_operator_table(filter_: dict[str, Any], expected: set[str]) -> None:
    assert hits(filter_) == expected


def test_datetimes_become_epoch_milliseconds() -> None:
    when = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    ms = 1705314600000
    assert matches(parse_filter({"t": when}), {"t": ms})
    paris = when.astimezone(timezone(timedelta(hours=1)))
    assert matches(parse_filter({"t": {"$gte": paris}}), {"t": ms})
    assert matches(parse_filter({"t": {"$lt": datetime(2024, 1, 15, 10, 30)}}), {"t": ms - 1})


def test_empty_filters_match_everything() -> None:
    assert parse_filter(None) is None
    assert parse_filter({}) is None
    assert matches(None, {"x": 1})


def test_tree_shape() -> None:
    assert parse_filter({"a": 1}) == Condition(("a",), "$eq", 1)
    assert parse_filter({"a": 1, "b": {"$in": [1, 2]}}) == Logical(
        "$and", (Condition(("a",), "$eq", 1), Condition(("b",), "$in", (1, 2)))
    )
    assert parse_filter({"a.b": {"$not": {"$gt": 1}}}) == Not(
        ("a", "b"), Condition(("a", "b"), "$gt", 1)
    )
    nested = parse_filter({"$and": [{"$and": [{"a": 1}, {"b": 2}]}, {"c": 3}]})
    assert isinstance(nested, Logical)
    assert [c.key for c in nested.children if isinstance(c, Condition)] == ["a", "b", "c"]
    assert resolve({"a": {"b": 1}}, ("a", "c")) is MISSING


def test_operators_and_capabilities() -> None:
    node = parse_filter({"$or": [{"a": 1}, {"b": {"$not": {"$exists": True}}}]})
    assert operators_in(node) == {"$or", "$eq", "$not", "$exists"}
    assert Capabilities(operators=ALL_OPERATORS).unsupported(node) is None
    assert Capabilities().unsupported(node) == "$exists"
    ranges = parse_filter({"a": {"$gt": 1}, "b": {"$lte": "m"}})
    assert Capabilities().unsupported(ranges) is None
    assert Capabilities(string_ranges=False).unsupported(ranges) == "$lte on strings"


def test_and_filters_combines_scope_and_user_filter() -> None:
    scope = parse_filter({"resource_id": "r1"})
    user = parse_filter({"topic": {"$in": ["a", "b"]}})
    combined = and_filters(scope, user)
    assert matches(combined, {"resource_id": "r1", "topic": "a"})
    assert not matches(combined, {"resource_id": "r2", "topic": "a"})
    assert and_filters(None, None) is None
    assert and_filters(scope, None) == scope


@pytest.mark.parametrize(
    ("filter_", "message", "path"),
    [
        ({"a": {"$foo": 1}}, "unknown operator $foo", "filter.a.$foo"),
        ({"$foo": [{"a": 1}]}, "unknown operator $foo", "filter.$foo"),
        ({"$gt": 1}, "must be applied to a field", "filter.$gt"),
        ({"a": {"$and": [{"b": 1}]}}, "belongs at document level", "filter.a.$and"),
        ({"$and": []}, "non-empty list", "filter.$and"),
        ({"$or": {"a": 1}}, "non-empty list", "filter.$or"),
        ({"$and": [{}]}, "empty filter object", "filter.$and[0]"),
        ({"$and": [{"a": {"$in": 1}}]}, "takes a list", "filter.$and[0].a.$in"),
        ({"a": [1, 2]}, "not a list", "filter.a"),
        ({"a": {"b": 1}}, "not an object", "filter.a"),
        ({"a": {"$eq": [1]}}, "not a list", "filter.a.$eq"),
        ({"a": {"$ne": {"b": 1}}}, "not an object", "filter.a.$ne"),
        ({"a": {"$gt": [1]}}, "not a list", "filter.a.$gt"),
        ({"a": {"$gt": None}}, "number or a string", "filter.a.$gt"),
        ({"a": {"$lte": True}}, "number or a string", "filter.a.$lte"),
        ({"a": {"$in": [[1]]}}, "not a list", "filter.a.$in[0]"),
        ({"a": {"$exists": 1}}, "true or false", "filter.a.$exists"),
        ({"a": {"$not": 1}}, "operator object", "filter.a.$not"),
        ({"a": {"$gt": 1, "b": 2}}, "mix operators and field names", "filter.a"),
        ({"a..b": 1}, "empty part", "filter.a..b"),
        ({"a.$b": 1}, "starting with '$'", "filter.a.$b"),
        ({"a": float("nan")}, "not a finite number", "filter.a"),
        ({"a": object()}, "not a metadata value", "filter.a"),
    ],
)
def test_errors_say_what_and_where(filter_: dict[str, Any], message: str, path: str) -> None:
    with pytest.raises(FilterError) as err:
        parse_filter(filter_)
    assert message in str(err.value)
    assert path in str(err.value)


def test_a_filter_must_be_an_object() -> None:
    with pytest.raises(FilterError, match="must be an object"):
        parse_filter([{"a": 1}])  # type: ignore[arg-type]


# ---- properties: the evaluator against algebraic laws and a second formulation ----

KEYS = ["a", "b", "c d"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 1.5, -2.5]),
    st.sampled_from(["", "a", "b", "B", "é", "1"]),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.fixed_dictionaries({}, optional={"x": scalars, "y": st.lists(scalars, max_size=2)}),
)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=3)
paths = st.sampled_from([*KEYS, "a.x", "b.y", "c d.x"])
range_values = st.one_of(st.integers(-3, 3), st.sampled_from([1.5, "a", "b", ""]))


@st.composite
def conditions(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(
        st.sampled_from(
            ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$all", "$exists"]
        )
    )
    if op in ("$gt", "$gte", "$lt", "$lte"):
        operand: Any = draw(range_values)
    elif op in ("$in", "$nin", "$all"):
        operand = draw(st.lists(scalars, max_size=3))
    elif op == "$exists":
        operand = draw(st.booleans())
    else:
        operand = draw(scalars)
    return {draw(paths): {op: operand}}


filters = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.builds(lambda fs: {"$and": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda fs: {"$or": fs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda fs: {"$nor": fs}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=6,
)


def _atoms(value: Any) -> set[tuple[str, Any]]:
    """A second formulation: a field as the set of typed atoms it offers to comparisons."""

    def atom(v: Any) -> tuple[str, Any]:
        if v is None:
            return ("null", None)
        if isinstance(v, bool):
            return ("bool", v)
        if isinstance(v, int | float):
            return ("num", float(v))
        if isinstance(v, str):
            return ("str", v)
        return ("obj", id(v))

    if value is MISSING:
        return {("null", None)}
    if isinstance(value, list):
        return {atom(v) for v in value}
    return {atom(value)}


def _oracle(doc: dict[str, Any], f: dict[str, Any]) -> bool:
    results = []
    for key, body in f.items():
        if key == "$and":
            results.append(all(_oracle(doc, g) for g in body))
        elif key == "$or":
            results.append(any(_oracle(doc, g) for g in body))
        elif key == "$nor":
            results.append(not any(_oracle(doc, g) for g in body))
        else:
            value = resolve(doc, tuple(key.split(".")))
            atoms = _atoms(value)
            ((op, operand),) = body.items()
            wanted = _atoms(operand) if op in ("$eq", "$ne") else None
            if op == "$eq":
                results.append(bool(atoms & wanted))
            elif op == "$ne":
                results.append(not atoms & wanted)
            elif op in ("$in", "$nin", "$all"):
                found = [bool(atoms & _atoms(v)) for v in operand]
                outcome = {
                    "$in": any(found),
                    "$nin": not any(found),
                    "$all": bool(found) and all(found),
                }
                results.append(outcome[op])
            elif op == "$exists":
                results.append((value is not MISSING) == operand)
            else:
                (kind, target), *_ = _atoms(operand)
                compare = {"$gt": gt, "$gte": ge, "$lt": lt, "$lte": le}[op]
                results.append(
                    value is not MISSING and any(k == kind and compare(v, target) for k, v in atoms)
                )
    return all(results)


@settings(max_examples=400, deadline=None)
@given(documents, filters)
def test_evaluator_agrees_with_a_second_formulation(doc: dict[str, Any], f: dict[str, Any]) -> None:
    assert matches(parse_filter(f), doc) == _oracle(doc, f)


@settings(max_examples=300, deadline=None)
@given(documents, conditions())
def test_not_is_the_complement(doc: dict[str, Any], condition: dict[str, Any]) -> None:
    ((path, ops),) = condition.items()
    assert matches(parse_filter({path: {"$not": ops}}), doc) != matches(
        parse_filter(condition), doc
    )


@settings(max_examples=300, deadline=None)
@given(documents, paths, st.lists(scalars, max_size=3), scalars)
def test_complements_and_equivalences(
    doc: dict[str, Any], path: str, values_: list[Any], value: Any
) -> None:
    def m(f: dict[str, Any]) -> bool:
        return matches(parse_filter(f), doc)

    assert m({path: {"$nin": values_}}) != m({path: {"$in": values_}})
    assert m({path: {"$ne": value}}) != m({path: {"$eq": value}})
    assert m({path: {"$in": values_}}) == any(m({path: v}) for v in values_)
    assert m({path: {"$all": values_}}) == (bool(values_) and all(m({path: v}) for v in values_))


@settings(max_examples=300, deadline=None)
@given(documents, filters, filters, filters)
def test_and_or_distribute(
    doc: dict[str, Any], a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]
) -> None:
    def m(f: dict[str, Any]) -> bool:
        return matches(parse_filter(f), doc)

    assert m({"$and": [a, {"$or": [b, c]}]}) == m({"$or": [{"$and": [a, b]}, {"$and": [a, c]}]})
    assert m({"$or": [a, {"$and": [b, c]}]}) == m({"$and": [{"$or": [a, b]}, {"$or": [a, c]}]})
    assert m({"$nor": [a, b]}) == m({"$and": [{"$nor": [a]}, {"$nor": [b]}]})
