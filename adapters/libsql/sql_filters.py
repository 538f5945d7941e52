"""Filters compiled to SQLite SQL over the JSON metadata column.

Every key reaches SQL as a bound JSON path and every value as a bound
parameter; nothing from a filter is pasted into the query text. Keys are
stored encoded (`encode_key`) so that any key, quotes and brackets included,
has a plain path. Each condition is a strict boolean (never NULL), so `NOT`
gives the exact complement the spec asks for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from recallstack.core.filters import Condition, Logical, Node, Not
from recallstack.core.key_encoding import decode_key, encode_key, map_keys
from recallstack.core.metadata import Scalar

_NUMBER = "('integer', 'real')"
_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
INDEXED_KEYS = ("resource_id", "thread_id", "message_id")
"""Reserved keys with expression indexes: their string equality is an index lookup."""
INDEXED_PATHS = frozenset(f'$."{k}"' for k in INDEXED_KEYS)


def encode_document(document: Mapping[str, Any]) -> str:
    """Metadata as stored: JSON with every key encoded."""
    return json.dumps(map_keys(document, encode_key), separators=(",", ":"))


def decode_document(text: str) -> dict[str, Any]:
    decoded: dict[str, Any] = map_keys(json.loads(text), decode_key)
    return decoded


def json_path(path: tuple[str, ...]) -> str:
    return "$" + "".join(f'."{encode_key(p)}"' for p in path)


def compile_filter(node: Node, table: str) -> tuple[str, list[Any]]:
    """SQL over `table`'s `metadata` column for a parsed filter, and its parameters."""
    params: list[Any] = []
    return _node(node, table, params), params


def _node(node: Node, table: str, params: list[Any]) -> str:
    if isinstance(node, Not):
        return f"NOT ({_node(node.child, table, params)})"
    if isinstance(node, Logical):
        parts = [_node(c, table, params) for c in node.children]
        if node.op == "$and":
            return "(" + " AND ".join(parts) + ")" if parts else "1"
        joined = "(" + " OR ".join(parts) + ")"
        return joined if node.op == "$or" else f"NOT {joined}"
    return _condition(node, table, params)


def _condition(c: Condition, table: str, params: list[Any]) -> str:
    path = json_path(c.path)
    if c.op == "$exists":
        params.append(path)
        return f"(json_type(metadata, ?) IS {'NOT ' if c.value else ''}NULL)"
    if c.op in ("$eq", "$ne"):
        sql = _equals(path, c.value, table, params)
        return sql if c.op == "$eq" else f"NOT {sql}"
    if c.op in ("$in", "$nin", "$all"):
        if not c.value:
            return "1" if c.op == "$nin" else "0"
        parts = [_equals(path, v, table, params) for v in c.value]
        joined = "(" + (" AND " if c.op == "$all" else " OR ").join(parts) + ")"
        return f"NOT {joined}" if c.op == "$nin" else joined
    return _compare(path, _RANGE[c.op], c.value, table, params)


def _kind(value: Scalar) -> str:
    if value is None:
        return "('null')"
    if isinstance(value, bool):
        return "('true')" if value else "('false')"
    return _NUMBER if isinstance(value, int | float) else "('text')"


def _equals(path: str, value: Scalar, table: str, params: list[Any]) -> str:
    """Field equals value, or is a list containing it; None also matches a missing field."""
    if isinstance(value, str) and path in INDEXED_PATHS:
        return _indexed_equals(path, value, table, params)
    if value is None or isinstance(value, bool):
        test = _field_test(path, _kind(value), None, None, table, params)
        if value is None:
            params.append(path)
            return f"({test} OR json_type(metadata, ?) IS NULL)"
        return test
    return _field_test(path, _kind(value), "=", value, table, params)


def _compare(path: str, op: str, value: Scalar, table: str, params: list[Any]) -> str:
    return _field_test(path, _kind(value), op, value, table, params)


def _field_test(
    path: str, kind: str, op: str | None, value: Scalar, table: str, params: list[Any]
) -> str:
    """The field, or an element of a list field, is of `kind` and (with `op`) `op value`."""
    scalar = f"json_type(metadata, ?) IN {kind}"
    element = f"e.type IN {kind}"
    scalar_params: list[Any] = [path]
    element_params: list[Any] = []
    if op is not None:
        scalar += f" AND json_extract(metadata, ?) {op} ?"
        element += f" AND e.value {op} ?"
        scalar_params += [path, value]
        element_params.append(value)
    params += [*scalar_params, path, path, *element_params]
    return (
        f"COALESCE(({scalar}) OR (json_type(metadata, ?) = 'array' AND EXISTS "
        f"(SELECT 1 FROM json_each(metadata, ?) e WHERE {element})), 0)"
    )


def _indexed_equals(path: str, value: str, table: str, params: list[Any]) -> str:
    """String equality on a reserved key, answered by its two expression indexes.

    The path is one of our constants (`INDEXED_PATHS`), written literally so
    that SQLite matches the index expressions; the value is still bound.
    """
    key = path[3:-1]
    params += [value, value]
    return (
        f"rowid IN (SELECT rowid FROM {table} INDEXED BY {table}_{key} "
        f"WHERE json_extract(metadata, '{path}') = ? AND json_type(metadata, '{path}') = 'text' "
        f"UNION ALL SELECT rowid FROM {table} INDEXED BY {table}_{key}_type "
        f"WHERE json_type(metadata, '{path}') = 'array' "
        f"AND EXISTS (SELECT 1 FROM json_each(metadata, '{path}') e "
        f"WHERE e.type = 'text' AND e.value = ?))"
    )


def index_statements(table: str) -> list[str]:
    """The expression indexes `_indexed_equals` relies on."""
    statements = []
    for key in INDEXED_KEYS:
        path = f'$."{key}"'
        statements += [
            f"CREATE INDEX IF NOT EXISTS {table}_{key} ON {table} "
            f"(json_extract(metadata, '{path}'))",
            f"CREATE INDEX IF NOT EXISTS {table}_{key}_type ON {table} "
            f"(json_type(metadata, '{path}'))",
        ]
    return statements
