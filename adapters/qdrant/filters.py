"""Filters compiled to Qdrant's filter model, exactly (docs/spec/backends.md §5).

One compiler serves the Edge engine and the client (local mode and servers):
it builds a small neutral tree, and each mode turns it into its own model
classes through a `Dialect`. `$eq` is a keyword match (strings, booleans as
stored) or a closed range (numbers, so 1 equals 1.0); lists match when an
element does; `$ne`/`$nin`/`$not`/`$nor` are `must_not`; `$eq: None` is
"null (or a list holding null) or not present". A path is present when it is
not `is_empty` (missing, null or `[]`), or is null, or is listed in `-p` as an
empty list. String ranges have no Qdrant equivalent and are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recallstack.adapters.qdrant.payload import EMPTY_LISTS, encode_scalar, field
from recallstack.core.filters import Condition, Logical, Node, Not
from recallstack.core.metadata import Scalar

NOTHING = "\x00nothing"
"""A value no `-p` entry ever has: matching it matches no point."""


@dataclass(frozen=True)
class Dialect:
    """How one Qdrant API spells filters."""

    match: Callable[[str, Any], Any]
    match_any: Callable[[str, list[Any]], Any]
    range: Callable[[str, dict[str, float]], Any]
    is_null: Callable[[str], Any]
    is_empty: Callable[[str], Any]
    filter: Callable[..., Any]
    """filter(must=[...], should=[...], must_not=[...])"""


def compile_filter(node: Node, dialect: Dialect) -> Any:
    return _node(node, dialect)


def _all(parts: list[Any], d: Dialect) -> Any:
    return d.filter(must=parts)


def _any(parts: list[Any], d: Dialect) -> Any:
    return d.filter(should=parts) if parts else _nothing(d)


def _none(parts: list[Any], d: Dialect) -> Any:
    return d.filter(must_not=parts) if parts else d.filter(must=[])


def _nothing(d: Dialect) -> Any:
    return d.filter(must=[d.match(EMPTY_LISTS, NOTHING)])


def _node(node: Node, d: Dialect) -> Any:
    if isinstance(node, Not):
        return _none([_node(node.child, d)], d)
    if isinstance(node, Logical):
        parts = [_node(c, d) for c in node.children]
        if node.op == "$and":
            return _all(parts, d)
        return _any(parts, d) if node.op == "$or" else _none(parts, d)
    return _condition(node, d)


def _condition(c: Condition, d: Dialect) -> Any:
    if c.op == "$exists":
        here = _present(c.path, d)
        return here if c.value else _none([here], d)
    if c.op in ("$eq", "$ne"):
        eq = _equals(c.path, c.value, d)
        return eq if c.op == "$eq" else _none([eq], d)
    if c.op in ("$in", "$nin"):
        any_ = _any(_members(c.path, c.value, d), d)
        return any_ if c.op == "$in" else _none([any_], d)
    if c.op == "$all":
        return _all([_equals(c.path, v, d) for v in c.value], d) if c.value else _nothing(d)
    bound = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}[c.op]
    return _all([d.range(field(c.path), {bound: float(c.value)})], d)


def _members(path: tuple[str, ...], values: tuple[Scalar, ...], d: Dialect) -> list[Any]:
    """`$in`'s alternatives: every string and boolean in one keyword `match_any` (a list
    matches when an element does, as with `match`), numbers and null one by one."""
    keywords = [encode_scalar(v) for v in values if isinstance(v, str | bool)]
    parts = [d.match_any(field(path), keywords)] if keywords else []
    return parts + [_equals(path, v, d) for v in values if not isinstance(v, str | bool)]


def _equals(path: tuple[str, ...], value: Scalar, d: Dialect) -> Any:
    key = field(path)
    if value is None:
        return _any([d.is_null(key), _none([_present(path, d)], d)], d)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _all([d.range(key, {"gte": float(value), "lte": float(value)})], d)
    return _all([d.match(key, encode_scalar(value))], d)


def _present(path: tuple[str, ...], d: Dialect) -> Any:
    key = field(path)
    return _any([_none([d.is_empty(key)], d), d.is_null(key), d.match(EMPTY_LISTS, key)], d)
