"""Filters compiled to SQLite SQL over the JSON metadata column.

Every key reaches SQL as a bound JSON path and every value as a bound
parameter; nothing from a filter is pasted into the query text. Keys are
stored encoded (`encode_key`) so that any key, quotes and brackets included,
has a plain path. Each condition is a strict boolean (never NULL), so `NOT`
gives the exact complement the spec asks for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from recallstack.adapters.key_encoding import decode_key, encode_key, map_keys
from recallstack.core.filters import Condition, Logical, Node, Not
from recallstack.core.metadata import Scalar
from recallstack.core.vectors import PARTITION_KEYS

_NUMBER = "('integer', 'real')"
_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
INDEXED_KEYS = ("message_id",)
"""Keys whose string equality in a filter is a lookup in their expression indexes."""
INDEXED_PATHS = frozenset(f'$."{k}"' for k in INDEXED_KEYS)


def encode_document(document: Mapping[str, Any]) -> str:
    """Metadata as stored: JSON with every key encoded."""
    return json.dumps(map_keys(document, encode_key), separators=(",", ":"))


_ESCAPED_KEY = re.compile(r'-[0-9a-f]{2}[A-Za-z0-9_-]*"\s*:')
"""The end of a key holding an escape (`-` and two hex digits). Only a key's closing
quote is followed by `:`, and a quote inside a string is escaped (`\\"`): a document
this misses has only plain keys."""


def decode_documents(joined: str) -> list[dict[str, Any]]:
    """Stored metadata documents joined by commas (SQLite's `group_concat`), keys
    decoded. A query decodes up to top_k of these: they are parsed as one JSON array,
    and walked only when some key holds an escape."""
    documents: list[dict[str, Any]] = json.loads(f"[{joined}]")
    if _ESCAPED_KEY.search(joined):
        return [map_keys(document, decode_key) for document in documents]
    return documents


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
        sql = _members(path, c.value, c.op == "$all", table, params)
        return f"NOT {sql}" if c.op == "$nin" else sql
    return _field_test(path, _kind(c.value), f"{_RANGE[c.op]} ?", [c.value], params)


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
        test = _field_test(path, _kind(value), "", [], params)
        if value is None:
            params.append(path)
            return f"({test} OR json_type(metadata, ?) IS NULL)"
        return test
    return _field_test(path, _kind(value), "= ?", [value], params)


def _field_test(path: str, kind: str, test: str, values: list[Any], params: list[Any]) -> str:
    """The field, or an element of a list field, is of `kind` and its value passes `test`
    (SQL that follows the value, with `values` as its parameters; empty for none)."""
    scalar = f"json_type(metadata, ?) IN {kind}"
    element = f"e.type IN {kind}"
    scalar_params: list[Any] = [path]
    if test:
        scalar += f" AND json_extract(metadata, ?) {test}"
        element += f" AND e.value {test}"
        scalar_params += [path, *values]
    params += [*scalar_params, path, path, *values]
    return (
        f"COALESCE(({scalar}) OR (json_type(metadata, ?) = 'array' AND EXISTS "
        f"(SELECT 1 FROM json_each(metadata, ?) e WHERE {element})), 0)"
    )


_IN_SET = "IN (SELECT value FROM json_each(?))"
"""A value-set test with one parameter, a JSON array: no statement grows with the list."""


def _members(
    path: str, values: tuple[Scalar, ...], every: bool, table: str, params: list[Any]
) -> str:
    """`$in` (any value matches) or `$all` (every value matches) in a statement whose
    size does not depend on how many values there are.

    Strings and numbers are each tested as one set bound as a JSON array; `true`,
    `false` and `null` (three at most) one by one, as `$eq` does.
    """
    strings = [v for v in values if isinstance(v, str)]
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    parts: list[str] = []
    for group, kind in ((strings, "('text')"), (numbers, _NUMBER)):
        if not group:
            continue
        if every:  # no value of the set is missing from the field
            params.append(json.dumps(group))
            test = _field_test(path, kind, "= v.value", [], params)
            parts.append(f"NOT EXISTS (SELECT 1 FROM json_each(?) v WHERE NOT {test})")
        elif kind == "('text')" and path in INDEXED_PATHS:
            parts.append(_indexed_equals(path, json.dumps(group), table, params, _IN_SET))
        else:
            parts.append(_field_test(path, kind, _IN_SET, [json.dumps(group)], params))
    for special in dict.fromkeys(v for v in values if v is None or isinstance(v, bool)):
        parts.append(_equals(path, special, table, params))
    return "(" + (" AND " if every else " OR ").join(parts) + ")"


def _indexed_equals(path: str, value: str, table: str, params: list[Any], test: str = "= ?") -> str:
    """String equality (or, with `test`, set membership) on a reserved key, answered
    by its two expression indexes.

    The path is one of our constants (`INDEXED_PATHS`), written literally so
    that SQLite matches the index expressions; the value is still bound.
    """
    key = path[3:-1]
    params += [value, value]
    return (
        f"rowid IN (SELECT rowid FROM {table} INDEXED BY {table}_{key} "
        f"WHERE json_extract(metadata, '{path}') {test} AND json_type(metadata, '{path}') = 'text' "
        f"UNION ALL SELECT rowid FROM {table} INDEXED BY {table}_{key}_type "
        f"WHERE json_type(metadata, '{path}') = 'array' "
        f"AND EXISTS (SELECT 1 FROM json_each(metadata, '{path}') e "
        f"WHERE e.type = 'text' AND e.value {test}))"
    )


def index_statements(table: str) -> list[str]:
    """The expression indexes of the partition's keys (the vector store's lookups)
    and of `INDEXED_KEYS` (`_indexed_equals` relies on them)."""
    statements = [
        f"CREATE INDEX IF NOT EXISTS {table}_{key} ON {table} "
        f"(json_extract(metadata, '{json_path((key,))}'))"
        for key in PARTITION_KEYS
    ]
    for key in INDEXED_KEYS:
        path = json_path((key,))
        statements += [
            f"CREATE INDEX IF NOT EXISTS {table}_{key} ON {table} "
            f"(json_extract(metadata, '{path}'))",
            f"CREATE INDEX IF NOT EXISTS {table}_{key}_type ON {table} "
            f"(json_type(metadata, '{path}'))",
        ]
    return statements
