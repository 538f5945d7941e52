"""Throwaway instances of the pinecone backend for the conformance suite and the tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from recallstack.adapters.pinecone.emulator import API_KEY, Emulator


@contextmanager
def emulator() -> Iterator[str]:
    """A fresh emulator on a loopback port: the real SDK talks to it over HTTP."""
    with Emulator().start() as url:
        yield f"pinecone://t{uuid.uuid4().hex[:8]}?host={url}&api_key={API_KEY}"


@contextmanager
def service() -> Iterator[str]:
    """The real service ($PINECONE_API_KEY): indexes under a fresh prefix, deleted after."""
    from recallstack.adapters.pinecone.store import PineconeVectorStore

    url = f"pinecone://t{uuid.uuid4().hex[:8]}"
    yield url
    store = PineconeVectorStore(url)
    for name in store.list_indexes():
        store.delete_index(name)
