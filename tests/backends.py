"""The backends tests run Memory on, built for a test: real engines, or the stand-ins
backends.md allows (MongoDB on mongomock, Pinecone on its emulator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallstack.adapters.libsql.storage import LibSQLStorage
from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore

BACKENDS = ["memory", "libsql", "pg", "qdrant-edge", "chroma", "mongo", "pinecone"]


def make_backends(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[Storage, VectorStore]:
    if kind == "memory":
        return InMemoryStorage(), InMemoryVectorStore()
    if kind in ("qdrant-edge", "chroma"):  # vectors only: storage stays in memory
        from recallstack.core.runtime.registry import registry

        scheme = "qdrant+edge" if kind == "qdrant-edge" else "chroma"
        return InMemoryStorage(), registry().vector_store(f"{scheme}:///{tmp_path / kind}")
    if kind == "pg":
        from recallstack.adapters.pg.storage import PgStorage
        from recallstack.adapters.pg.vector import PgVectorStore

        url = request.getfixturevalue("pg_url")
        return PgStorage(url), PgVectorStore(url)
    if kind == "pinecone":  # vectors on the emulator, storage in LibSQL
        from recallstack.core.runtime.registry import registry

        _, url = request.getfixturevalue("pinecone_emulator")
        storage = LibSQLStorage(f"libsql:///{tmp_path / 'pinecone-storage.db'}")
        return storage, registry().vector_store(url)
    if kind == "mongo":  # on the stand-in, mongomock
        from recallstack.adapters.mongo.storage import MongoStorage
        from recallstack.adapters.mongo.targets import stand_in
        from recallstack.adapters.mongo.vector import MongoVectorStore

        with stand_in() as url:
            return MongoStorage(url), MongoVectorStore(url)
    url = f"libsql:///{tmp_path / 'memory.db'}"
    return LibSQLStorage(url), LibSQLVectorStore(url)
