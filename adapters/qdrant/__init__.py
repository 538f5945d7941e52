"""Qdrant: the Edge engine in process, the client's local mode, and servers.

URLs: `qdrant+edge:///folder` (Qdrant Edge, `qdrant-edge-py`; `search_threads=`),
`qdrant+local:///folder` and `qdrant+local://:memory:` (qdrant-client's local
mode, a Python re-implementation meant for tests), `qdrant://host:6333`
(a server; `api_key=`, `https=`; awaited through `AsyncQdrantClient` under
`AsyncMemory`). Drivers are imported only when used.
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
    index_types=frozenset({"hnsw", "flat"}),
    exact=False,
    string_ranges=False,
)
"""Qdrant has no string ranges; `search="exact"` makes every query exact."""


def _edge(url: str, search: Any = "auto", **options: Any) -> VectorStore:
    from recallstack.adapters.qdrant.store import QdrantVectorStore

    return QdrantVectorStore(url, "qdrant-edge", search, **options)


def _client(url: str, search: Any = "auto", **options: Any) -> VectorStore:
    from recallstack.adapters.qdrant.store import QdrantVectorStore

    return QdrantVectorStore(url, "qdrant", search, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="qdrant-edge",
            schemes=("qdrant+edge",),
            factory=_edge,
            capabilities=CAPABILITIES,
            extra="qdrant",
            requires=("qdrant_edge",),
            description="Qdrant Edge: Qdrant's engine in process",
        )
    )
    register(
        Backend(
            kind="vector",
            name="qdrant",
            schemes=("qdrant", "qdrant+http", "qdrant+https", "qdrant+local"),
            factory=_client,
            capabilities=CAPABILITIES,
            extra="qdrant",
            requires=("qdrant_client",),
            description="Qdrant servers, and qdrant-client's local mode",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    from recallstack.adapters.qdrant import targets

    register(
        ConformanceTarget(
            backend="qdrant-edge",
            kind="vector",
            start=targets.edge_folder,
            mode="in process, exact",
            options={"search": "exact"},
        )
    )
    register(
        ConformanceTarget(
            backend="qdrant-edge", kind="vector", start=targets.edge_folder, mode="in process"
        )
    )
    register(
        ConformanceTarget(
            backend="qdrant",
            kind="vector",
            start=targets.local_memory,
            mode="client local mode",
            # under AsyncMemory, through AsyncQdrantClient over the same collections,
            # as a server is reached: the awaited path tested where no server runs
            options={"search": "exact", "asyncio_local": True},
            asyncio_driver=True,
        )
    )
