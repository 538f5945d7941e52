"""How recallstack metadata is stored in Chroma, so that every filter is exact.

Chroma metadata is flat, holds no nulls, no empty or mixed lists, and its
filters have no `$not` and no "key exists". So each metadata path `f` (keys
encoded and joined with dots) is stored as shadow keys a filter can address:

| key | holds |
|---|---|
| `v\\0f` | a scalar value: str, bool, or a number stored as a float (Chroma mis-compares ints) |
| `tK\\0f` | True, with K its kind: i(nt) n (float) s(tring) b(ool) z (null) l(ist) o(bject) |
| `z\\0f` | True when the value is null or a list holding null |
| `ls\\0f`, `ln\\0f`, `lb\\0f` | a list's strings, numbers (as floats), booleans |
| `mx\\0f`, `mn\\0f`, `h\\0f` | a list's largest and smallest number, and True when it has one |
| `\\0json` | the metadata itself, for reading back, unless the kind and value keys say it all |

Every path has a kind key, so "the path is present" is one of them being
True, and "missing" none of them (`$ne` matches a missing key). The kind is
in the key's name and its value is always True because Chroma writes a
boolean far faster than a string: with the kind as a string value (`t\\0f`:
"s"), a record of two strings wrote 15% slower than the same record raw; with
booleans, as fast (measured, interleaved). Flat metadata of strings,
booleans, nulls and numbers a float holds exactly (the common case: memory's
own keys) is read back from its kind and value keys, and gets no `\\0json`
key: every stored string costs Chroma time on each write. Records written
with one are read from it, whatever they hold.
"""

from __future__ import annotations

import json
from typing import Any

from recallstack.adapters.key_encoding import decode_key, encode_key
from recallstack.adapters.value_kinds import kind
from recallstack.core.metadata import Metadata

JSON = "\x00json"
KINDS = ["i", "n", "s", "b", "z", "l", "o"]
"""Every kind a kind key names. A list-valued presence key per record would do the
same job, but Chroma writes a list several times slower than a string."""
NUMBERS = ["i", "n"]
"""The kinds of a number."""
_EXACT_IN_A_FLOAT = 2**53


def key(kind: str, path: tuple[str, ...]) -> str:
    return shadow(kind, path_of(path))


def shadow(kind: str, encoded: str) -> str:
    """The shadow key of one kind for an encoded path (`path_of`)."""
    return f"{kind}\x00{encoded}"


def path_of(path: tuple[str, ...]) -> str:
    return ".".join(encode_key(p) for p in path)


def _flatten(value: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
    """Add the shadow keys of an object whose encoded path is `prefix` ("" at the top)."""
    for name, child in value.items():
        path = prefix + encode_key(name)  # encoded once for all of its keys
        out[shadow("t" + kind(child), path)] = True
        if isinstance(child, dict):
            _flatten(child, path + ".", out)
        elif isinstance(child, list):
            strings = [x for x in child if isinstance(x, str)]
            numbers = [
                float(x) for x in child if isinstance(x, int | float) and not isinstance(x, bool)
            ]
            bools = [x for x in child if isinstance(x, bool)]
            for listed, items in (("ls", strings), ("ln", numbers), ("lb", bools)):
                if items:
                    out[shadow(listed, path)] = items
            if numbers:
                out[shadow("mx", path)] = max(numbers)
                out[shadow("mn", path)] = min(numbers)
                out[shadow("h", path)] = True
            if any(x is None for x in child):
                out[shadow("z", path)] = True
        elif child is None:
            out[shadow("z", path)] = True
        elif isinstance(child, int | float) and not isinstance(child, bool):
            out[shadow("v", path)] = float(child)  # Chroma compares ints with floats wrongly
        else:
            out[shadow("v", path)] = child


def _said_by_keys(metadata: Metadata) -> bool:
    """Whether the kind and value keys alone give the metadata back, exactly."""
    return bool(metadata) and all(
        value is None
        or isinstance(value, str | float)
        or (isinstance(value, int) and abs(value) <= _EXACT_IN_A_FLOAT)
        for value in metadata.values()
    )


def encode(metadata: Metadata) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _flatten(metadata, "", out)
    if not _said_by_keys(metadata):
        out[JSON] = json.dumps(metadata)
    return out


def decode(stored: dict[str, Any] | None) -> Metadata:
    stored = stored or {}
    if JSON in stored:
        decoded: Metadata = json.loads(stored[JSON])
        return decoded
    metadata: Metadata = {}
    for name in stored:
        if name[0] == "t" and name[2:3] == "\x00":  # a kind key, tK\0path
            path = name[3:]
            value: Any = stored.get(shadow("v", path))  # none for a null
            metadata[decode_key(path)] = int(value) if name[1] == "i" else value
    return metadata
