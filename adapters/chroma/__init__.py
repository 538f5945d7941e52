"""Chroma: in process (persistent folder or memory) and a `chroma run` server.

The `chromadb` driver is imported only when a store is built. Tests start a
real server with `chroma run --path TMP --port P` on loopback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.filters import ALL_OPERATORS
from recallstack.core.runtime.hookspecs import hookimpl
from recallstack.core.runtime.registry import Backend, ConformanceTarget

CAPABILITIES = Capabilities(
    operators=ALL_OPERATORS,
    index_types=frozenset({"hnsw"}),
    exact=False,
    string_ranges=False,
    max_filter_values=2_000,
)
"""Chroma compares only numbers, and its HNSW search is approximate. A list of values
costs Chroma's SQL a few bound variables each, and SQLite allows 32,766 in all."""


def _store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.chroma.store import ChromaVectorStore

    return ChromaVectorStore(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="chroma",
            schemes=("chroma", "chroma+http", "chroma+https"),
            factory=_store,
            capabilities=CAPABILITIES,
            extra="chroma",
            requires=("chromadb",),
            description="Chroma, in process or a server (HNSW)",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    from recallstack.adapters.chroma import targets

    register(
        ConformanceTarget(backend="chroma", kind="vector", start=targets.folder, mode="in process")
    )
    register(
        ConformanceTarget(
            backend="chroma",
            kind="vector",
            start=targets.server,
            mode="server",
            asyncio_driver=True,  # AsyncHttpClient under AsyncMemory
        )
    )
