"""The kind of a metadata value as one letter, for the adapters that store a value's kind
beside it (Chroma, Pinecone): i(nt) n (float) s(tring) b(ool) z (null) l(ist) o(bject)."""

from __future__ import annotations

from typing import Any


def kind(value: Any) -> str:
    if value is None:
        return "z"
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "n"
    if isinstance(value, str):
        return "s"
    return "l" if isinstance(value, list) else "o"
