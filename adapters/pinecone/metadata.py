"""How recallstack metadata is stored in Pinecone, so that every filter is exact.

Pinecone metadata is flat and holds strings, numbers, booleans and lists of
strings: no nulls, no objects, no other lists. So each metadata path `p`
(keys encoded by `key_encoding` and joined with `--`, which the encoding never
produces) is stored as typed keys a filter can address:

| key | holds |
|---|---|
| `k~p` | the value's kind: i(nt) n(float) s(tring) b(ool) z (null) l(ist) o(bject) |
| `s~p`, `n~p`, `b~p` | a string, number or boolean value |
| `l~p` | a list's items as typed strings: `s:text`, `i:1`, `n:1.5`, `b:1`, `z:` |
| `hi~p`, `lo~p` | a list's largest and smallest number |

Every path has a kind key, so "present" is `k~p` existing and "missing" its
absence; each comparison reads the key of its own type, so a number never
equals a string or a boolean. Metadata is read back from these keys. An
integer a float cannot hold exactly (beyond 2**53) is refused: Pinecone
numbers are floats.
"""

from __future__ import annotations

import json
from typing import Any

from recallstack.adapters.key_encoding import decode_key, encode_key
from recallstack.adapters.value_kinds import kind
from recallstack.core.errors import InvalidInputError
from recallstack.core.metadata import Metadata, Scalar

SEPARATOR = "--"
TAG = "~"
ORIGINAL_ID = "~id"
"""The caller's id, kept when it is too long for Pinecone or looks like a mapped one."""
MAX_METADATA = 40 * 1024
EXACT = 2**53


def path_of(path: tuple[str, ...]) -> str:
    return SEPARATOR.join(encode_key(part) for part in path)


def key(tag: str, path: tuple[str, ...]) -> str:
    return f"{tag}{TAG}{path_of(path)}"


def _number(value: int | float, where: str) -> int | float:
    if isinstance(value, int) and abs(value) > EXACT:
        raise InvalidInputError(f"{where}: {value} is beyond the integers Pinecone's numbers hold")
    return value


def item(value: Scalar) -> str:
    """A list item (or a value looked for in a list) as a typed string."""
    if value is None:
        return "z:"
    if isinstance(value, bool):
        return "b:1" if value else "b:0"
    if isinstance(value, int):
        return f"i:{value}"
    if isinstance(value, float):
        return f"n:{value!r}"
    return f"s:{value}"


def items(value: Scalar) -> list[str]:
    """Every typed string that equals `value` (1 and 1.0 are one number)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT:
        return [item(value), f"i:{int(value)}"]
    if isinstance(value, int) and not isinstance(value, bool):
        return [item(value), f"n:{float(value)!r}"]
    return [item(value)]


def encode(metadata: Metadata, id_: str) -> dict[str, Any]:
    """The stored keys of one record; over Pinecone's 40 KB it is refused, naming the id."""
    out: dict[str, Any] = {}
    _flatten(metadata, (), out, f"metadata of {id_!r}")
    if len(json.dumps(out).encode()) > MAX_METADATA:
        raise InvalidInputError(
            f"metadata of {id_!r}: over Pinecone's {MAX_METADATA:,} bytes per record once stored"
        )
    return out


def _flatten(
    value: dict[str, Any], prefix: tuple[str, ...], out: dict[str, Any], where: str
) -> None:
    for name, child in value.items():
        path = (*prefix, name)
        form = kind(child)
        out[key("k", path)] = form
        here = f"{where}.{name}"
        if form == "o":
            _flatten(child, path, out, here)
        elif form == "l":
            if child:
                out[key("l", path)] = [
                    item(_number(x, f"{here}[{n}]") if isinstance(x, int) else x)
                    for n, x in enumerate(child)
                ]
            numbers = [x for x in child if isinstance(x, int | float) and not isinstance(x, bool)]
            if numbers:
                out[key("hi", path)] = max(numbers)
                out[key("lo", path)] = min(numbers)
        elif form in ("i", "n"):
            out[key("n", path)] = _number(child, here)
        elif form in ("s", "b"):
            out[key(form, path)] = child


def _parse_item(text: str) -> Scalar:
    tag, _, rest = text.partition(":")
    if tag == "z":
        return None
    if tag == "b":
        return rest == "1"
    if tag == "i":
        return int(rest)
    if tag == "n":
        return float(rest)
    return rest


def decode(stored: dict[str, Any] | None) -> Metadata:
    """The metadata the typed keys hold."""
    stored = stored or {}
    kinds = sorted(
        (name[2:].split(SEPARATOR), form)
        for name, form in stored.items()
        if name.startswith("k" + TAG)
    )
    metadata: Metadata = {}
    for parts, form in kinds:  # parents sort before their children
        node = metadata
        for part in parts[:-1]:
            node = node[decode_key(part)]
        encoded = SEPARATOR.join(parts)
        value: Any
        if form == "o":
            value = {}
        elif form == "l":
            value = [_parse_item(x) for x in stored.get(f"l{TAG}{encoded}", [])]
        elif form == "z":
            value = None
        elif form in ("i", "n"):
            number = stored[f"n{TAG}{encoded}"]
            value = int(number) if form == "i" else float(number)
        else:
            value = stored[f"{form}{TAG}{encoded}"]
        node[decode_key(parts[-1])] = value
    return metadata
