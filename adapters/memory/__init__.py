"""The in-memory reference backend (`memory://`): exact, obvious, and the conformance oracle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.filters import ALL_OPERATORS
from recallstack.core.runtime.hookspecs import hookimpl
from recallstack.core.runtime.registry import Backend, ConformanceTarget

CAPABILITIES = Capabilities(operators=ALL_OPERATORS)


def _vector_store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.memory.vector import InMemoryVectorStore

    return InMemoryVectorStore(**options)


def _storage(url: str, **options: Any) -> Storage:
    from recallstack.adapters.memory.storage import InMemoryStorage

    return InMemoryStorage(**options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="memory",
            schemes=("memory",),
            factory=_vector_store,
            capabilities=CAPABILITIES,
            description="in-process reference store (numpy, exact); the conformance oracle",
        )
    )


@hookimpl
def register_storages(register: Callable[[Backend[Storage]], None]) -> None:
    register(
        Backend(
            kind="storage",
            name="memory",
            schemes=("memory",),
            factory=_storage,
            description="in-process storage of threads, messages and resources",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    from recallstack.adapters.memory import targets

    register(
        ConformanceTarget(backend="memory", kind="vector", start=targets.fresh, mode="in process")
    )
    register(
        ConformanceTarget(backend="memory", kind="storage", start=targets.fresh, mode="in process")
    )
