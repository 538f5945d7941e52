"""Long lists of ids split to fit what one backend call may carry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def batched(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """`items` in consecutive lists of at most `size` (itertools.batched, Python 3.12)."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
