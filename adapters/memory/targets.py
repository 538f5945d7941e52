"""Throwaway instances of the memory backend for the conformance suite and the tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fresh() -> Iterator[str]:
    yield "memory://"
