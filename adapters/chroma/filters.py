"""Filters compiled to Chroma `where` documents, exactly, without `$not`.

Chroma has no negation, so a negated subtree is rewritten by De Morgan down
to its conditions, and each condition has a positive and a negative form over
the shadow keys of `metadata.py` (`$ne` and `$not_contains` match missing
keys, which is what a complement needs).
"""

from __future__ import annotations

from typing import Any

from recallstack.adapters.chroma.metadata import KINDS, NUMBERS, key
from recallstack.core.filters import Condition, Node, without_negation
from recallstack.core.metadata import Scalar
from recallstack.core.vectors import Partition

NEVER = "\x00never"
NOTHING: dict[str, Any] = {NEVER: {"$eq": 1}}
EVERYTHING: dict[str, Any] = {NEVER: {"$ne": 1}}
_OPPOSITE = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}


def compile_filter(node: Node) -> dict[str, Any]:
    return without_negation(node, _condition, _join)


def within(where: dict[str, Any] | None, partition: Partition | None) -> dict[str, Any] | None:
    """A compiled filter (or None) restricted to the partition: each of its keys' string
    field equals its value."""
    if partition is None:
        return where
    fields = [{key("v", (k,)): {"$eq": v}} for k, v in partition.fields().items()]
    return _join("$and", fields if where is None else [*fields, where])


FANOUT = 8
"""Most parts one `$and`/`$or` holds: longer lists nest as a balanced tree, so that
Chroma's SQL stays far below SQLite's expression depth of 1,000 (a flat list of a
few hundred conditions is past it)."""


def _join(op: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    if not parts:
        return EVERYTHING if op == "$and" else NOTHING
    if len(parts) == 1:
        return parts[0]
    if len(parts) <= FANOUT:
        return {op: parts}
    size = -(-len(parts) // FANOUT)
    return {op: [_join(op, parts[i : i + size]) for i in range(0, len(parts), size)]}


def _condition(c: Condition, negate: bool) -> dict[str, Any]:
    if c.op == "$exists":
        return _present(c.path, c.value != negate)
    if c.op in ("$eq", "$ne"):
        return _equals(c.path, c.value, negate != (c.op == "$ne"))
    if c.op in ("$in", "$nin"):
        return _members(c.path, c.value, negate != (c.op == "$nin"))
    if c.op == "$all":
        if not c.value:
            return EVERYTHING if negate else NOTHING
        return _join("$or" if negate else "$and", [_equals(c.path, v, negate) for v in c.value])
    return _range(c.path, c.op, c.value, negate)


def _members(path: tuple[str, ...], values: tuple[Scalar, ...], negate: bool) -> dict[str, Any]:
    """`$in`: a scalar field is one of the values (Chroma's own `$in`, one condition
    for all the strings and one for all the numbers), or a list field holds one;
    `true`, `false` and `null` as `_equals` tests them. Negated: the complement."""
    strings = [v for v in values if isinstance(v, str)]
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    parts: list[dict[str, Any]] = []
    for group, listed in ((strings, "ls"), (numbers, "ln")):
        if group:
            parts.append({key("v", path): {"$nin" if negate else "$in": group}})
            contains = "$not_contains" if negate else "$contains"
            parts += [{key(listed, path): {contains: v}} for v in group]
    parts += [_equals(path, v, negate) for v in values if v is None or isinstance(v, bool)]
    return _join("$and" if negate else "$or", parts)


def _present(path: tuple[str, ...], wanted: bool) -> dict[str, Any]:
    """The path is present: one of its kind keys is True (absent: none is)."""
    return _of_kind(path, KINDS, wanted)


def _of_kind(path: tuple[str, ...], kinds: list[str], wanted: bool) -> dict[str, Any]:
    """The path holds a value of one of `kinds`; not wanted: of none of them, or is missing
    (`$ne` matches a missing key)."""
    if wanted:
        return _join("$or", [{key("t" + kind, path): {"$eq": True}} for kind in kinds])
    return _join("$and", [{key("t" + kind, path): {"$ne": True}} for kind in kinds])


def _equals(path: tuple[str, ...], value: Scalar, negate: bool) -> dict[str, Any]:
    """Equal, or a list holding it; None also matches a missing field. Negated: the complement."""
    join = "$and" if negate else "$or"
    if value is None:
        return _join(
            join,
            [
                {key("z", path): {"$ne" if negate else "$eq": True}},
                _present(path, negate),
            ],
        )
    item: Scalar
    if isinstance(value, bool):
        listed, item = "lb", value
    elif isinstance(value, int | float):
        listed, item = "ln", float(value)
    else:
        listed, item = "ls", value
    return _join(
        join,
        [
            {key("v", path): {"$ne" if negate else "$eq": item}},
            {key(listed, path): {"$not_contains" if negate else "$contains": item}},
        ],
    )


def _range(path: tuple[str, ...], op: str, value: Scalar, negate: bool) -> dict[str, Any]:
    """A number (or a list's largest/smallest number) compares; negated: none does."""
    extreme = "mx" if op in ("$gt", "$gte") else "mn"
    value = float(value)  # type: ignore[arg-type]
    if not negate:
        return {
            "$or": [
                {key("v", path): {op: value}},
                {key(extreme, path): {op: value}},
            ]
        }
    opposite = _OPPOSITE[op]
    return {
        "$and": [
            {"$or": [_of_kind(path, NUMBERS, False), {key("v", path): {opposite: value}}]},
            {"$or": [{key("h", path): {"$ne": True}}, {key(extreme, path): {opposite: value}}]},
        ]
    }
