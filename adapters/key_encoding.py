"""Metadata keys encoded into a plain alphabet, for backends whose key paths are picky.

Letters, digits and `_` stay as they are; every other byte of the key's UTF-8
(`-` included) becomes `-` and two hex digits. The encoding is injective, so
any key (quotes, brackets, spaces, `$`) can be stored and addressed safely,
and the reserved keys (`resource_id`, ...) keep their names.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

_PLAIN_CHARACTERS = string.ascii_letters + string.digits + "_"
_PLAIN = frozenset(_PLAIN_CHARACTERS)
_ALL_PLAIN = re.compile(f"[{_PLAIN_CHARACTERS}]*")
"""The common case in one C call: every metadata key of every record is encoded."""


def encode_key(key: str) -> str:
    if _ALL_PLAIN.fullmatch(key):
        return key
    return "".join(c if c in _PLAIN else "".join(f"-{b:02x}" for b in c.encode()) for c in key)


def decode_key(key: str) -> str:
    if "-" not in key:
        return key
    out = bytearray()
    i = 0
    while i < len(key):
        if key[i] == "-":
            out.append(int(key[i + 1 : i + 3], 16))
            i += 3
        else:
            out += key[i].encode()
            i += 1
    return out.decode()


def map_keys(value: Any, fn: Callable[[str], str]) -> Any:
    """Apply `fn` to every key of nested objects."""
    if isinstance(value, dict):
        return {fn(k): map_keys(v, fn) for k, v in value.items()}
    return value
