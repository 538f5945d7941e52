"""The filter language: Mongo-style documents over vector metadata.

`parse_filter` validates a document once, before any backend is called, and
returns a small typed tree. `matches` is the reference evaluator every backend
is checked against. Adapters compile the tree with `walk` and `operators_in`
(and `without_negation` where the backend has no negation);
`Capabilities.unsupported` says what a backend must refuse.
Semantics: docs/spec/backends.md §5.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from recallstack.core.errors import FilterError, InvalidInputError
from recallstack.core.metadata import Scalar, normalize_scalar

COMPARISON_OPERATORS: Final = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
RANGE_OPERATORS: Final = frozenset({"$gt", "$gte", "$lt", "$lte"})
LIST_OPERATORS: Final = frozenset({"$in", "$nin", "$all"})
LOGICAL_OPERATORS: Final = frozenset({"$and", "$or", "$nor"})
FIELD_OPERATORS: Final = COMPARISON_OPERATORS | LIST_OPERATORS | {"$exists", "$not"}
ALL_OPERATORS: Final = FIELD_OPERATORS | LOGICAL_OPERATORS
REQUIRED_OPERATORS: Final = COMPARISON_OPERATORS | {"$in", "$nin", "$and", "$or"}
EXTENDED_OPERATORS: Final = ALL_OPERATORS - REQUIRED_OPERATORS


@dataclass(frozen=True)
class Condition:
    """One operator applied to one field: `{path: {op: value}}`."""

    path: tuple[str, ...]
    op: str
    value: Any  # a scalar; a tuple of scalars for $in/$nin/$all; a bool for $exists

    @property
    def key(self) -> str:
        return ".".join(self.path)

    @functools.cached_property
    def members(self) -> frozenset[tuple[str | None, Scalar]]:
        """The values of `$in`/`$nin`/`$all` as a set of `_member` keys, built once:
        the reference evaluator's membership tests cost the same for 10,000 values as
        for one."""
        return frozenset(_member(v) for v in self.value)


@dataclass(frozen=True)
class Not:
    """`{path: {$not: {...}}}`: the operator document does not match."""

    path: tuple[str, ...]
    child: Node


@dataclass(frozen=True)
class Logical:
    """`$and` / `$or` / `$nor` over child nodes (an empty `$and` is true)."""

    op: str
    children: tuple[Node, ...]


Node = Condition | Not | Logical


MAX_FILTER_DEPTH = 32
"""Nesting of logical operators and `$not` in one filter."""
MAX_FILTER_CONDITIONS = 1_000
"""Conditions in one filter (a list of `$in` values is one condition: see Capabilities)."""


def parse_filter(document: Mapping[str, Any] | None) -> Node | None:
    """Validate a filter document; `None` or `{}` means "match everything".

    A filter is bounded (`MAX_FILTER_DEPTH`, `MAX_FILTER_CONDITIONS`) so that no
    caller can make one query cost without limit.
    """
    if document is None:
        return None
    if not isinstance(document, Mapping):
        raise FilterError(f"a filter must be an object, got {type(document).__name__}")
    if not document:
        return None
    node = _parse_document(document, "filter", 0)
    if sum(1 for n in walk(node) if isinstance(n, Condition)) > MAX_FILTER_CONDITIONS:
        raise FilterError(f"a filter may hold at most {MAX_FILTER_CONDITIONS:,} conditions")
    return simplify(node)


def _deeper(depth: int, where: str) -> int:
    if depth >= MAX_FILTER_DEPTH:
        raise FilterError(f"nested deeper than {MAX_FILTER_DEPTH} levels", where)
    return depth + 1


def _parse_document(document: Any, where: str, depth: int) -> Node:
    depth = _deeper(depth, where)
    if not isinstance(document, Mapping):
        raise FilterError(f"expected a filter object, got {type(document).__name__}", where)
    if not document:
        raise FilterError("an empty filter object is only allowed as the whole filter", where)
    nodes: list[Node] = []
    for key, value in document.items():
        here = f"{where}.{key}"
        if not isinstance(key, str):
            raise FilterError(f"field names must be strings, got {key!r}", where)
        if key in LOGICAL_OPERATORS:
            if not isinstance(value, list | tuple) or not value:
                raise FilterError(f"{key} takes a non-empty list of filter objects", here)
            children = [_parse_document(d, f"{here}[{i}]", depth) for i, d in enumerate(value)]
            nodes.append(Logical(key, tuple(children)))
        elif key in FIELD_OPERATORS:
            raise FilterError(
                f"{key} must be applied to a field, as {{field: {{{key}: ...}}}}", here
            )
        elif key.startswith("$"):
            raise FilterError(f"unknown operator {key}", here)
        else:
            nodes.append(_parse_field(_parse_path(key, here), value, here, depth))
    return nodes[0] if len(nodes) == 1 else Logical("$and", tuple(nodes))


def _parse_path(key: str, where: str) -> tuple[str, ...]:
    """A field path; `key` itself does not start with `$` (the caller refused that)."""
    path = tuple(key.split("."))
    if "" in path:
        raise FilterError(f"field path {key!r} has an empty part", where)
    if ".$" in key:
        raise FilterError(f"field path {key!r} has a part starting with '$'", where)
    return path


def _is_operator_document(value: Any) -> bool:
    return isinstance(value, Mapping) and any(
        isinstance(k, str) and k.startswith("$") for k in value
    )


def _parse_field(path: tuple[str, ...], value: Any, where: str, depth: int) -> Node:
    if not _is_operator_document(value):
        return Condition(path, "$eq", _scalar(value, "$eq", where))
    if not all(isinstance(k, str) and k.startswith("$") for k in value):
        raise FilterError("an operator object may not mix operators and field names", where)
    nodes = [
        _parse_operator(path, op, operand, f"{where}.{op}", depth) for op, operand in value.items()
    ]
    return nodes[0] if len(nodes) == 1 else Logical("$and", tuple(nodes))


def _parse_operator(path: tuple[str, ...], op: str, operand: Any, where: str, depth: int) -> Node:
    if op in COMPARISON_OPERATORS:
        scalar = _scalar(operand, op, where)
        if op in RANGE_OPERATORS and (scalar is None or isinstance(scalar, bool)):
            raise FilterError(f"{op} takes a number or a string, got {operand!r}", where)
        return Condition(path, op, scalar)
    if op in LIST_OPERATORS:
        if not isinstance(operand, list | tuple):
            raise FilterError(f"{op} takes a list of values, got {type(operand).__name__}", where)
        values = tuple(_scalar(v, op, f"{where}[{i}]") for i, v in enumerate(operand))
        return Condition(path, op, values)
    if op == "$exists":
        if not isinstance(operand, bool):
            raise FilterError(f"$exists takes true or false, got {operand!r}", where)
        return Condition(path, op, operand)
    if op == "$not":
        if not _is_operator_document(operand):
            raise FilterError("$not takes an operator object such as {$gt: 5}", where)
        return Not(path, _parse_field(path, operand, where, _deeper(depth, where)))
    if op in LOGICAL_OPERATORS:
        raise FilterError(f"{op} belongs at document level, not inside a field", where)
    raise FilterError(f"unknown operator {op}", where)


def _scalar(value: Any, op: str, where: str) -> Scalar:
    if isinstance(value, Mapping | list | tuple):
        kind = "an object" if isinstance(value, Mapping) else "a list"
        raise FilterError(f"{op} takes a single value, not {kind}", where)
    try:
        return normalize_scalar(value, where)
    except InvalidInputError as exc:
        raise FilterError(str(exc)) from None


def simplify(node: Node) -> Node:
    """Flatten nested `$and`/`$or` of the same kind and unwrap single children."""
    if isinstance(node, Not):
        return Not(node.path, simplify(node.child))
    if isinstance(node, Condition):
        return node
    children: list[Node] = []
    for child in map(simplify, node.children):
        if isinstance(child, Logical) and child.op == node.op and node.op != "$nor":
            children.extend(child.children)
        else:
            children.append(child)
    if len(children) == 1 and node.op != "$nor":
        return children[0]
    return Logical(node.op, tuple(children))


def and_filters(*nodes: Node | None) -> Node | None:
    """Combine filters with `$and`, ignoring absent ones."""
    present = [n for n in nodes if n is not None]
    if not present:
        return None
    return simplify(Logical("$and", tuple(present)))


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, parents before children."""
    yield node
    if isinstance(node, Not):
        yield from walk(node.child)
    elif isinstance(node, Logical):
        for child in node.children:
            yield from walk(child)


def operators_in(node: Node | None) -> set[str]:
    """The operators a filter uses (`{a: 1}` uses `$eq`)."""
    if node is None:
        return set()
    found: set[str] = set()
    for n in walk(node):
        found.add("$not" if isinstance(n, Not) else n.op)
    return found


T = TypeVar("T")


def without_negation(
    node: Node,
    condition: Callable[[Condition, bool], T],
    join: Callable[[str, list[T]], T],
    negate: bool = False,
) -> T:
    """Compile a filter for a backend with no `$not` or `$nor`: negations are pushed down
    to the conditions by De Morgan. `condition(c, negated)` compiles one condition, and
    `join("$and" | "$or", parts)` combines compiled parts."""
    if isinstance(node, Not):
        return without_negation(node.child, condition, join, not negate)
    if isinstance(node, Logical):
        if node.op == "$nor":
            return without_negation(Logical("$or", node.children), condition, join, not negate)
        op = node.op if not negate else ("$or" if node.op == "$and" else "$and")
        return join(op, [without_negation(c, condition, join, negate) for c in node.children])
    return condition(node, negate)


# ---- the reference evaluator -------------------------------------------------


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def resolve(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a dot path, or `MISSING`."""
    value: Any = document
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def _kind(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _same(a: Any, b: Scalar) -> bool:
    if a is None or b is None:
        return a is None and b is None
    kind = _kind(a)
    return kind is not None and kind == _kind(b) and a == b


def _member(value: Any) -> tuple[str | None, Scalar]:
    """A scalar as it compares under `_same`: by kind, then by value (1 and 1.0 hash
    alike, True and 1 differ by kind); a list or object matches no scalar."""
    kind = _kind(value)
    if kind is None and value is not None:
        return ("unmatched", id(value))
    return (kind, value)


def _contains(value: Any, members: frozenset[tuple[str | None, Scalar]]) -> bool:
    """Whether `_equals(value, v)` holds for some v whose `_member` key is in `members`."""
    if value is MISSING:
        return (None, None) in members
    if isinstance(value, list):
        return any(_member(item) in members for item in value)
    return _member(value) in members


def _equals(value: Any, target: Scalar) -> bool:
    if value is MISSING:
        return target is None
    if isinstance(value, list):
        return any(_same(item, target) for item in value)
    return _same(value, target)


def _compare(value: Any, op: str, target: Scalar) -> bool:
    if value is MISSING:
        return False
    items = value if isinstance(value, list) else [value]
    kind = _kind(target)
    for item in items:
        if _kind(item) != kind:
            continue
        if (
            (op == "$gt" and item > target)
            or (op == "$gte" and item >= target)
            or (op == "$lt" and item < target)
            or (op == "$lte" and item <= target)
        ):
            return True
    return False


def _condition_matches(c: Condition, document: Mapping[str, Any]) -> bool:
    value = resolve(document, c.path)
    if c.op == "$eq":
        return _equals(value, c.value)
    if c.op == "$ne":
        return not _equals(value, c.value)
    if c.op in RANGE_OPERATORS:
        return _compare(value, c.op, c.value)
    if c.op == "$in":
        return _contains(value, c.members)
    if c.op == "$nin":
        return not _contains(value, c.members)
    if c.op == "$all":
        return bool(c.value) and all(_equals(value, v) for v in c.value)
    if c.op == "$exists":
        return (value is not MISSING) is c.value
    raise AssertionError(f"unparsed operator {c.op}")


def matches(node: Node | None, document: Mapping[str, Any]) -> bool:
    """Whether a metadata document satisfies a parsed filter (the reference semantics)."""
    if node is None:
        return True
    if isinstance(node, Condition):
        return _condition_matches(node, document)
    if isinstance(node, Not):
        return not matches(node.child, document)
    if node.op == "$and":
        return all(matches(c, document) for c in node.children)
    if node.op == "$or":
        return any(matches(c, document) for c in node.children)
    return not any(matches(c, document) for c in node.children)
