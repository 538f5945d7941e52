"""Vector documents in MongoDB: metadata under `m` with encoded keys, the vector in
`v` as a BSON float32 vector, and the part of a filter MongoDB selects with.

Metadata keys go through `key_encoding` (so `.`, `$` and any other character are
stored safely), and a name that reads as an integer gets a `-d` prefix, which
the encoding never produces: MQL reads `a.0` as "element 0 of the list a", which
a key named `0` must not become.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from recallstack.adapters.key_encoding import decode_key, encode_key
from recallstack.core.errors import InvalidInputError
from recallstack.core.filters import RANGE_OPERATORS, Condition, Logical, Node
from recallstack.core.metadata import Metadata
from recallstack.core.vectors import Matrix, Partition

METADATA = "m"
VECTOR = "v"
FLOAT32 = b"\x27\x00"
"""The header of a BSON binary vector (subtype 9): dtype float32, no padding."""
VECTOR_SUBTYPE = 9
INT64 = (-(2**63), 2**63 - 1)


_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER_PREFIX = "-d"


def field_name(key: str) -> str:
    """A metadata key as a MongoDB field name: no `.`, no leading `$`, not a number."""
    encoded = encode_key(key)
    return _NUMBER_PREFIX + encoded if _INTEGER.fullmatch(encoded) else encoded


def key_name(field: str) -> str:
    """The metadata key a field name holds (`field_name` reversed)."""
    if field.startswith(_NUMBER_PREFIX) and _INTEGER.fullmatch(field[2:]):
        field = field[2:]
    return decode_key(field)


def field_path(path: tuple[str, ...]) -> str:
    """The dotted MQL path of a metadata field."""
    return ".".join((METADATA, *map(field_name, path)))


def encode_metadata(metadata: Metadata, where: str) -> dict[str, Any]:
    """Metadata with encoded keys; an integer BSON cannot hold is refused, named."""
    return {field_name(k): _encode_value(v, f"{where}.{k}") for k, v in metadata.items()}


def _encode_value(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        return encode_metadata(value, where)
    if isinstance(value, list):
        return [_encode_value(item, f"{where}[{n}]") for n, item in enumerate(value)]
    if type(value) is int and not INT64[0] <= value <= INT64[1]:
        raise InvalidInputError(f"{where}: {value} is outside the 64-bit integers MongoDB stores")
    return value


def decode_metadata(stored: dict[str, Any]) -> Metadata:
    """Metadata as read back: keys decoded, and every integer a plain `int`. pymongo
    reads a BSON int64 (any integer beyond 32 bits: epoch milliseconds, say) as
    `bson.Int64`, an `int` subclass the other backends never return."""
    return {key_name(k): _decode_value(v) for k, v in stored.items()}


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        return decode_metadata(value)
    if isinstance(value, list):
        return [_decode_value(item) for item in value]
    if isinstance(value, int) and type(value) is not int and type(value) is not bool:
        return int(value)
    return value


def vector_binary(row: Matrix) -> Any:
    """One vector as a BSON binary vector, the form Atlas Vector Search indexes."""
    from bson.binary import Binary

    return Binary(FLOAT32 + row.astype("<f4", copy=False).tobytes(), VECTOR_SUBTYPE)


def vector_rows(blobs: list[bytes], dimension: int) -> Matrix:
    """Stored binary vectors as an (n, d) float32 matrix."""
    raw = b"".join(bytes(blob)[len(FLOAT32) :] for blob in blobs)
    return np.frombuffer(raw, dtype="<f4").reshape(len(blobs), dimension)


def in_partition(partition: Partition | None, explicit: bool = False) -> dict[str, Any]:
    """The MQL that selects the documents a partition holds (each of its keys has an
    index); with `explicit`, in operator form (as Atlas's `$vectorSearch` takes it)."""
    if partition is None:
        return {}
    return {field_path((k,)): {"$eq": v} if explicit else v for k, v in partition.fields().items()}


def both(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two selections together."""
    if not first or not second:
        return first or second
    return {"$and": [first, second]}


def selection(
    node: Node | None, fields: frozenset[tuple[str, ...]] | None = None
) -> tuple[dict[str, Any], bool]:
    """(the MQL that selects candidates, whether it is the whole filter); with
    `fields`, only conditions on those metadata paths, each in operator form (as
    Atlas's `$vectorSearch` filter takes them).

    MongoDB selects with the filter's top-level conditions that compare strings
    or numbers and never negate: equality and `$in` on strings, ranges. Those
    mean the same on MongoDB and on the mongomock stand-in. The rest of the filter is
    checked against each candidate with the reference evaluator (the filter's
    semantics, exactly), so the candidates only have to include every match.
    """
    if node is None:
        return {}, True
    conjuncts = node.children if isinstance(node, Logical) and node.op == "$and" else (node,)
    selected = [
        mql
        for c in conjuncts
        if (fields is None or (isinstance(c, Condition) and c.path in fields))
        and (mql := _selecting(c, explicit=fields is not None)) is not None
    ]
    whole = len(selected) == len(conjuncts)
    if not selected:
        return {}, whole
    return (selected[0] if len(selected) == 1 else {"$and": selected}), whole


def _selecting(node: Node, explicit: bool) -> dict[str, Any] | None:
    if not isinstance(node, Condition):
        return None
    value = node.value
    if node.op == "$eq" and isinstance(value, str):  # a string is never an operator here
        return {field_path(node.path): {"$eq": value} if explicit else value}
    if node.op == "$in" and all(isinstance(v, str) for v in value):
        return {field_path(node.path): {"$in": list(value)}}
    if node.op in RANGE_OPERATORS:  # the parser allows strings and numbers only
        return {field_path(node.path): {node.op: value}}
    return None
