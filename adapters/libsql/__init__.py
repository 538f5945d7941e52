"""LibSQL, the embedded default: storage and vector store in one local file.

URLs: `libsql:///relative/path.db`, `libsql:////absolute/path.db`,
`libsql://:memory:`, and remote `libsql://host` (Turso / sqld; pass
`auth_token=`). The `libsql` driver is imported only when a store is built.
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
    operators=ALL_OPERATORS, index_types=frozenset({"flat", "diskann"}), exact=True
)
"""Exact by default; `index_config={"type": "diskann"}` opts one index into libSQL's ANN."""


def _vector_store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.libsql.vector import LibSQLVectorStore

    return LibSQLVectorStore(url, **options)


def _storage(url: str, **options: Any) -> Storage:
    from recallstack.adapters.libsql.storage import LibSQLStorage

    return LibSQLStorage(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="libsql",
            schemes=("libsql",),
            factory=_vector_store,
            capabilities=CAPABILITIES,
            extra="libsql",
            requires=("libsql",),
            description="LibSQL file: vectors as F32_BLOB, exact search in numpy",
        )
    )


@hookimpl
def register_storages(register: Callable[[Backend[Storage]], None]) -> None:
    register(
        Backend(
            kind="storage",
            name="libsql",
            schemes=("libsql",),
            factory=_storage,
            extra="libsql",
            requires=("libsql",),
            description="LibSQL file: threads, messages, resources",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    from recallstack.adapters.libsql import targets

    for kind in ("vector", "storage"):
        register(
            ConformanceTarget(backend="libsql", kind=kind, start=targets.database_file, mode="file")
        )
    register(
        ConformanceTarget(backend="libsql", kind="vector", start=targets.in_memory, mode=":memory:")
    )
