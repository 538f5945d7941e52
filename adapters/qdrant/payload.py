"""How recallstack metadata is stored in a Qdrant payload, so that every filter is exact.

A point's payload is its metadata, flat at the top level, plus reserved keys:
`-id` (the caller's id), `-p` (paths holding an empty list, when there are
any) and `-n` (a cosine vector's length, when it is not 1: Qdrant normalises
them, and `include_vector` returns what was stored).
- Metadata keys are encoded (`recallstack.adapters.key_encoding`), so any key is
  a plain path. An encoded key's `-` is always followed by two hex digits, so
  no metadata key can be a reserved one.
- The metadata is not nested under a key of its own: Edge's Python binding
  spends about 6 µs converting each nested object, on every write and read.
- Booleans are stored as the strings "\\x00T" / "\\x00F" (Qdrant would
  otherwise match `true` against the integer 1); a user string starting with
  "\\x00" gets one more "\\x00", so nothing collides.
- `-p` is needed because an empty list is the one present value Qdrant's
  `is_empty` cannot tell from a missing field; it is left out when empty, as
  it nearly always is (every payload value costs Edge about 3 µs to write).
String ids are mapped to UUIDv5, deterministically.
"""

from __future__ import annotations

import struct
import uuid
from hashlib import sha1
from typing import Any

from recallstack.adapters.key_encoding import decode_key, encode_key
from recallstack.core.metadata import Metadata, Scalar
from recallstack.core.vectors import PARTITION_KEYS

NAMESPACE = uuid.UUID("5f0b9e8c-1c9a-4d0e-9d5b-7e3f8a2c6b41")
TRUE, FALSE = "\x00T", "\x00F"
ID, EMPTY_LISTS, LENGTH = "-id", "-p", "-n"
INDEXED_FIELDS = (EMPTY_LISTS, *PARTITION_KEYS)
"""Keyword payload indexes (both drivers create them): presence paths and the partition's keys."""
RESERVED = frozenset({ID, EMPTY_LISTS, LENGTH})
_FLOAT, _BITS = struct.Struct("<d"), struct.Struct("<q")


def point_id(id_: str) -> str:
    """`str(uuid.uuid5(NAMESPACE, id_))`, without building the UUID object: that
    costs 2 µs of the 3 µs each point's id takes, and Qdrant parses the string."""
    h = sha1(NAMESPACE.bytes + id_.encode()).hexdigest()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def encode_scalar(value: Scalar) -> Scalar:
    if isinstance(value, bool):
        return TRUE if value else FALSE
    if isinstance(value, str) and value.startswith("\x00"):
        return "\x00" + value
    return value


def decode_scalar(value: Any) -> Any:
    if value == TRUE:
        return True
    if value == FALSE:
        return False
    if isinstance(value, str) and value.startswith("\x00"):
        return value[1:]
    return value


def _encode(metadata: Metadata, empty_lists: list[str], prefix: str = "") -> dict[str, Any]:
    """The stored form of an object; appends the paths of its empty lists to `empty_lists`.

    One walk with exact type tests, as normalised metadata holds only these types:
    every point written goes through it.
    """
    stored: dict[str, Any] = {}
    for key, value in metadata.items():
        name = encode_key(key)
        kind = type(value)
        if kind is str:
            stored[name] = "\x00" + value if value[:1] == "\x00" else value
        elif kind is dict:
            stored[name] = _encode(value, empty_lists, f"{prefix}{name}.")
        elif kind is list:
            if not value:
                empty_lists.append(prefix + name)
            stored[name] = [encode_scalar(v) for v in value]
        else:
            stored[name] = encode_scalar(value)
    return stored


def _decode(value: Any) -> Any:
    # exact type tests, and no call for the plain strings and numbers most values are:
    # every query decodes every hit's metadata
    kind = type(value)
    if kind is str:
        return decode_scalar(value) if value[:1] == "\x00" else value
    if kind is dict:
        return {decode_key(k): _decode(v) for k, v in value.items()}
    if kind is list:
        return [decode_scalar(v) for v in value]
    return value


def encode(id_: str, metadata: Metadata, length: float = 1.0) -> dict[str, Any]:
    """The payload of a point; `length` is its vector's, kept when it is not 1."""
    empty_lists: list[str] = []
    payload = _encode(metadata, empty_lists)
    payload[ID] = id_
    if empty_lists:
        payload[EMPTY_LISTS] = empty_lists
    if abs(length - 1.0) > 1e-6:
        # as the float's bits, an int: Edge's binding converts an int in about 1 µs
        # and a float in about 3, on every write
        payload[LENGTH] = _BITS.unpack(_FLOAT.pack(length))[0]
    return payload


def length(payload: dict[str, Any]) -> float:
    """The length of the vector a payload was written with."""
    bits = payload.get(LENGTH)
    return 1.0 if bits is None else float(_FLOAT.unpack(_BITS.pack(bits))[0])


def decode(payload: dict[str, Any]) -> tuple[str, Metadata]:
    metadata: Metadata = {
        decode_key(k): _decode(v) for k, v in payload.items() if k not in RESERVED
    }
    return str(payload[ID]), metadata


def field(path: tuple[str, ...]) -> str:
    """The payload key of a metadata path; also how `-p` lists it."""
    return ".".join(encode_key(p) for p in path)
