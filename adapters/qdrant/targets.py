"""Throwaway instances of the qdrant backend for the conformance suite and the tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def edge_folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="recallstack-qdrant-edge-") as tmp:
        yield f"qdrant+edge:///{tmp}"


@contextmanager
def local_memory() -> Iterator[str]:
    """qdrant-client's local mode in memory (a fresh one for each store opened on it)."""
    yield "qdrant+local://:memory:"
