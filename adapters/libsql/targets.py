"""Throwaway instances of the libsql backend for the conformance suite and the tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory


@contextmanager
def database_file() -> Iterator[str]:
    with TemporaryDirectory(prefix="recallstack-libsql-") as tmp:
        yield f"libsql:///{Path(tmp) / 'conformance.db'}"


@contextmanager
def in_memory() -> Iterator[str]:
    yield "libsql://:memory:"
