"""How recallstack metadata is stored in a Qdrant payload, so that every filter is exact.

A point's payload is `{"id": <caller's id>, "m": <metadata>, "p": [<paths>], "n": <norm>}`:
- keys are encoded (`recallstack.core.key_encoding`), so any key is a plain path;
- booleans are stored as the strings "\\x00T" / "\\x00F" (Qdrant would otherwise
  match `true` against the integer 1); a user string starting with "\\x00" gets
  one more "\\x00", so nothing collides;
- `p` lists the paths holding an empty list, the one present value Qdrant's
  `is_empty` cannot tell from a missing field; it is left out when there are
  none, as it nearly always is (every payload value costs Edge about 3 µs to
  write);
- `n` is the vector's length when it is not 1 (Qdrant normalises cosine vectors).
String ids are mapped to UUIDv5, deterministically.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from recallstack.core.key_encoding import decode_key, encode_key
from recallstack.core.metadata import Metadata, Scalar

NAMESPACE = uuid.UUID("5f0b9e8c-1c9a-4d0e-9d5b-7e3f8a2c6b41")
TRUE, FALSE = "\x00T", "\x00F"


def point_id(id_: str) -> str:
    return str(uuid.uuid5(NAMESPACE, id_))


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


def _encode(value: Any) -> Any:
    if isinstance(value, dict):
        return {encode_key(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encode_scalar(v) for v in value]
    return encode_scalar(value)


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


def _empty_lists(value: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, child in value.items():
        if child == []:
            yield prefix + encode_key(key)
        elif isinstance(child, dict):
            yield from _empty_lists(child, f"{prefix}{encode_key(key)}.")


def encode(id_: str, metadata: Metadata, norm: float = 1.0) -> dict[str, Any]:
    payload: dict[str, Any] = {"id": id_, "m": _encode(metadata)}
    empty = list(_empty_lists(metadata))
    if empty:
        payload["p"] = empty
    if abs(norm - 1.0) > 1e-6:
        payload["n"] = norm
    return payload


def decode(payload: dict[str, Any]) -> tuple[str, Metadata]:
    metadata: Metadata = _decode(payload.get("m") or {})
    return str(payload["id"]), metadata


def field(path: tuple[str, ...]) -> str:
    """The payload key of a metadata path."""
    return "m." + ".".join(encode_key(p) for p in path)


def listed(path: tuple[str, ...]) -> str:
    """The entry in `p` that says a metadata path holds an empty list."""
    return ".".join(encode_key(p) for p in path)
