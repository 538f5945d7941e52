"""Filters compiled to Pinecone filter documents over the typed keys of
`metadata.py`, exactly. Pinecone has no `$not` or `$nor`, so a negated subtree is
rewritten by De Morgan down to its conditions, and each condition has a
positive and a negative form. Pinecone's `$ne` and `$nin` never match a missing
key, so every negative form says what it wants of a missing one.
"""

from __future__ import annotations

from typing import Any

from recallstack.adapters.pinecone.metadata import TAG, items, key
from recallstack.core.filters import Condition, Node, without_negation
from recallstack.core.metadata import Scalar
from recallstack.core.vectors import Partition

NEVER = f"{TAG}never"
"""A key no record has."""
NOTHING: dict[str, Any] = {NEVER: {"$exists": True}}
EVERYTHING: dict[str, Any] = {NEVER: {"$exists": False}}
_OPPOSITE = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}


def compile_filter(node: Node) -> dict[str, Any]:
    return without_negation(node, _condition, _join)


def within(flt: dict[str, Any] | None, partition: Partition | None) -> dict[str, Any] | None:
    """A compiled filter (or None) restricted to the partition: each of its keys' string
    field equals its value."""
    if partition is None:
        return flt
    fields = [{key("s", (k,)): {"$eq": v}} for k, v in partition.fields().items()]
    return _join("$and", fields if flt is None else [*fields, flt])


def _join(op: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    if not parts:
        return EVERYTHING if op == "$and" else NOTHING
    return parts[0] if len(parts) == 1 else {op: parts}


def _condition(c: Condition, negate: bool) -> dict[str, Any]:
    if c.op == "$exists":
        return {key("k", c.path): {"$exists": c.value != negate}}
    if c.op in ("$eq", "$ne"):
        return _members(c.path, (c.value,), negate != (c.op == "$ne"))
    if c.op in ("$in", "$nin"):
        return _members(c.path, c.value, negate != (c.op == "$nin"))
    if c.op == "$all":
        if not c.value:
            return EVERYTHING if negate else NOTHING
        return _join("$or" if negate else "$and", [_members(c.path, (v,), negate) for v in c.value])
    return _range(c.path, c.op, c.value, negate)


def _absent_or(name: str, condition: dict[str, Any]) -> dict[str, Any]:
    """The key is missing, or holds a value meeting `condition`."""
    return {"$or": [{name: {"$exists": False}}, {name: condition}]}


def _members(path: tuple[str, ...], values: tuple[Scalar, ...], negate: bool) -> dict[str, Any]:
    """Equal to one of the values, or a list holding one (None also matches a missing
    field). Negated: the complement."""
    if not values:
        return EVERYTHING if negate else NOTHING
    typed = {
        tag: [v for v in values if _tag(v) == tag]
        for tag in ("s", "n", "b")
        if any(_tag(v) == tag for v in values)
    }
    listed = [form for v in values for form in items(v)]
    parts: list[dict[str, Any]] = []
    for tag, group in typed.items():
        name = key(tag, path)
        parts.append(_absent_or(name, {"$nin": group}) if negate else {name: {"$in": group}})
    lists = key("l", path)
    parts.append(_absent_or(lists, {"$nin": listed}) if negate else {lists: {"$in": listed}})
    if None in values:
        kinds = key("k", path)
        parts.append(
            {kinds: {"$nin": ["z"]}}
            if negate
            else {"$or": [{kinds: {"$exists": False}}, {kinds: {"$in": ["z"]}}]}
        )
    return _join("$and" if negate else "$or", parts)


def _tag(value: Scalar) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "b"
    return "n" if isinstance(value, int | float) else "s"


def _range(path: tuple[str, ...], op: str, value: Scalar, negate: bool) -> dict[str, Any]:
    """A number, or a list's largest/smallest number, compares; negated: none does.
    (Ranges over strings are refused before: `Capabilities.string_ranges`.)"""
    extreme = key("hi" if op in ("$gt", "$gte") else "lo", path)
    number = key("n", path)
    if not negate:
        return {"$or": [{number: {op: value}}, {extreme: {op: value}}]}
    opposite = _OPPOSITE[op]
    return {"$and": [_absent_or(number, {opposite: value}), _absent_or(extreme, {opposite: value})]}
