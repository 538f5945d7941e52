"""Filters compiled to Postgres SQL over a `jsonb` metadata column.

Equality is jsonb containment (`metadata @> {"a": {"b": v}}`, and `[v]` for
list fields), which the GIN index serves; ranges unnest the field and compare
numbers as numeric and strings under the "C" collation (code-point order).
Every key path and value is a bound parameter. Conditions are never NULL, so
`NOT` is the exact complement.
"""

from __future__ import annotations

import hashlib
from typing import Any

from recallstack.core.filters import Condition, Logical, Node, Not
from recallstack.core.metadata import Scalar
from recallstack.core.vectors import PARTITION_KEYS, Partition

_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


NAME_LIMIT = 63
"""Postgres cuts longer identifiers to this many bytes."""


def index_name(table: str, suffix: str) -> str:
    """`<table>_<suffix>`, or, past Postgres's 63 bytes, the table's name cut with a
    hash of it kept: cut names collide (`..._resource_id` and `..._resource_id_type`),
    and `CREATE INDEX IF NOT EXISTS` then skips the second index without a word."""
    name = f"{table}_{suffix}"
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha1(table.encode()).hexdigest()[:8]
    return f"{table[: NAME_LIMIT - len(suffix) - len(digest) - 2]}_{digest}_{suffix}"


def index_statements(table: str) -> list[str]:
    """A btree expression index per partition key (`in_partition` relies on them)."""
    return [
        f"CREATE INDEX IF NOT EXISTS {index_name(table, key)} ON {table} ((metadata ->> '{key}'))"
        for key in PARTITION_KEYS
    ]


def in_partition(partition: Partition) -> tuple[str, list[Any]]:
    """SQL for the rows a partition holds: one lookup in each key's expression index.
    The keys are our constants, written literally so that Postgres matches the index
    expressions; the values are bound."""
    fields = partition.fields()
    return " AND ".join(f"(metadata ->> '{k}') = %s" for k in fields), list(fields.values())


SET_ABOVE = 16
"""`$in`/`$nin`/`$all` lists longer than this are bound as one jsonb array (`_members`),
so no statement grows with the list; shorter ones are containment tests the GIN index serves."""


def compile_filter(node: Node) -> tuple[str, list[Any]]:
    """SQL over the `metadata` column for a parsed filter, and its parameters."""
    params: list[Any] = []
    return _node(node, params), params


def _node(node: Node, params: list[Any]) -> str:
    if isinstance(node, Not):
        return f"NOT ({_node(node.child, params)})"
    if isinstance(node, Logical):
        parts = [_node(c, params) for c in node.children]
        if node.op == "$and":
            return "(" + " AND ".join(parts) + ")"
        joined = "(" + " OR ".join(parts) + ")"
        return joined if node.op == "$or" else f"NOT {joined}"
    return _condition(node, params)


def _condition(c: Condition, params: list[Any]) -> str:
    if c.op == "$exists":
        params.append(list(c.path))
        return f"(metadata #> %s) IS {'NOT ' if c.value else ''}NULL"
    if c.op in ("$eq", "$ne"):
        sql = _equals(c.path, c.value, params)
        return sql if c.op == "$eq" else f"NOT {sql}"
    if c.op in ("$in", "$nin", "$all"):
        if not c.value:
            return "TRUE" if c.op == "$nin" else "FALSE"
        if len(c.value) > SET_ABOVE:
            sql = _members(c.path, c.value, c.op == "$all", params)
        else:
            parts = [_equals(c.path, v, params) for v in c.value]
            sql = "(" + (" AND " if c.op == "$all" else " OR ").join(parts) + ")"
        return f"NOT {sql}" if c.op == "$nin" else sql
    return _compare(c.path, _RANGE[c.op], c.value, params)


def _nest(path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _equals(path: tuple[str, ...], value: Scalar, params: list[Any]) -> str:
    """Field equals value or is a list containing it; None also matches a missing field."""
    from psycopg.types.json import Jsonb

    params += [Jsonb(_nest(path, value)), Jsonb(_nest(path, [value]))]
    sql = "(metadata @> %s OR metadata @> %s"
    if value is None:
        params.append(list(path))
        sql += " OR (metadata #> %s) IS NULL"
    return sql + ")"


def _members(
    path: tuple[str, ...], values: tuple[Scalar, ...], every: bool, params: list[Any]
) -> str:
    """`$in` (any value matches) or `$all` (every value matches) over a value set bound
    as one `jsonb[]` parameter.

    The field is taken as the list of its elements (a scalar as a list of one, a
    missing field as `[null]`, so that `None` matches it as `$eq` does); jsonb
    equality compares numbers numerically and never equates a bool to a number.
    """
    from psycopg.types.json import Jsonb

    elements = (
        "jsonb_array_elements(CASE jsonb_typeof(metadata #> %s) WHEN 'array' "
        "THEN metadata #> %s ELSE jsonb_build_array(metadata #> %s) END) e"
    )
    field = [list(path)] * 3
    wanted = [Jsonb(v) for v in dict.fromkeys(values)]
    if every:
        params += [wanted, *field]
        return (
            "NOT EXISTS (SELECT 1 FROM unnest(%s::jsonb[]) w(value) "
            f"WHERE NOT EXISTS (SELECT 1 FROM {elements} WHERE e.value = w.value))"
        )
    params += [*field, wanted]
    return f"EXISTS (SELECT 1 FROM {elements} WHERE e.value IN (SELECT unnest(%s::jsonb[])))"


def _compare(path: tuple[str, ...], op: str, value: Scalar, params: list[Any]) -> str:
    params.append(list(path))
    if isinstance(value, str):
        test = f"jsonb_typeof(e) = 'string' AND (e #>> '{{}}') COLLATE \"C\" {op} %s"
    else:
        test = f"jsonb_typeof(e) = 'number' AND (e #>> '{{}}')::numeric {op} %s"
    params.append(value)
    return (
        "EXISTS (SELECT 1 FROM (SELECT metadata #> %s AS v) f, "
        "jsonb_array_elements(CASE jsonb_typeof(f.v) WHEN 'array' THEN f.v "
        f"ELSE jsonb_build_array(f.v) END) e WHERE {test})"
    )
