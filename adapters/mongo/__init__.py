"""MongoDB: storage and vector store, self-hosted or Atlas.

URLs: `mongodb://...` and `mongodb+srv://...` (the database is the URL's path,
`recallstack` when it has none), or `client=` an existing `MongoClient` (never
closed by the store); `mongomock://NAME` is an in-process stand-in for tests.
The driver (pymongo) is imported only when a store is built. No MongoDB server
runs on the project's machines: the conformance suite runs on mongomock, and
on a real deployment when `RECALLSTACK_MONGODB_URL` is set.
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

CAPABILITIES = Capabilities(operators=ALL_OPERATORS, exact=True)
"""Exact on any MongoDB; an index searched through Atlas Vector Search is approximate."""
URL_ENV = "RECALLSTACK_MONGODB_URL"
MODE_ENV = "RECALLSTACK_MONGODB_MODE"
"""The conformance mode the `URL_ENV` deployment is reported under (`server` when unset;
CI names the engine it runs: `secantusdb`, `secantusdb-standalone`)."""
SCHEMES = ("mongodb", "mongodb+srv", "mongomock")


def _vector_store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.mongo.vector import MongoVectorStore

    return MongoVectorStore(url, **options)


def _storage(url: str, **options: Any) -> Storage:
    from recallstack.adapters.mongo.storage import MongoStorage

    return MongoStorage(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="mongo",
            schemes=SCHEMES,
            factory=_vector_store,
            capabilities=CAPABILITIES,
            extra="mongo",
            requires=("pymongo",),
            description="MongoDB: exact search in numpy, or Atlas Vector Search",
        )
    )


@hookimpl
def register_storages(register: Callable[[Backend[Storage]], None]) -> None:
    register(
        Backend(
            kind="storage",
            name="mongo",
            schemes=SCHEMES,
            factory=_storage,
            extra="mongo",
            requires=("pymongo",),
            description="MongoDB: threads, messages, resources",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    import os

    from recallstack.adapters.mongo import targets

    for kind in ("storage", "vector"):
        register(
            ConformanceTarget(
                backend="mongo",
                kind=kind,
                start=targets.stand_in,
                mode="exact" if kind == "vector" else "default",
                options={"search": "exact"} if kind == "vector" else {},
                stand_in="mongomock",
                asyncio_driver=True,  # through stand_in.AsyncStandIn under AsyncMemory
            )
        )
        if os.environ.get(URL_ENV):
            register(
                ConformanceTarget(
                    backend="mongo",
                    kind=kind,
                    start=targets.server,
                    mode=os.environ.get(MODE_ENV, "server"),
                    asyncio_driver=True,  # AsyncMongoClient under AsyncMemory
                )
            )
