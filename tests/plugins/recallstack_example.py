"""A third-party recallstack plugin, as an outside author would write it.

It reuses the reference backends under its own name and scheme, registers a
backend whose driver is not installed (to show the missing-extra error), an
embedder of its own, and one factory that makes the wrong kind of object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from recallstack import (
    Backend,
    Capabilities,
    ConformanceTarget,
    Embedder,
    Storage,
    VectorStore,
    hookimpl,
)


def _store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.memory.vector import InMemoryVectorStore

    class ExampleStore(InMemoryVectorStore):
        backend = "example"
        capabilities = Capabilities()

    return ExampleStore()


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="example",
            schemes=("example",),
            factory=_store,
            capabilities=Capabilities(),
            description="a third-party test plugin",
        )
    )
    register(
        Backend(
            kind="vector",
            name="example-remote",
            schemes=("example+remote",),
            factory=_store,
            extra="example-remote",
            requires=("recallstack_example_driver_that_is_not_installed",),
        )
    )


def _storage(url: str, **options: Any) -> Storage:
    from recallstack.adapters.memory.storage import InMemoryStorage

    return InMemoryStorage()


def _wrong(url: str, **options: Any) -> Storage:
    return "not a storage"  # type: ignore[return-value]


@hookimpl
def register_storages(register: Callable[[Backend[Storage]], None]) -> None:
    register(Backend(kind="storage", name="example", schemes=("example",), factory=_storage))
    register(Backend(kind="storage", name="example-wrong", schemes=("wrong",), factory=_wrong))


class LengthEmbedder(Embedder):
    """A 2-d embedder: (length, vowels) of the text, normalised."""

    model_id = "lengths"
    dimension = 2

    def embed(self, texts: Any) -> Any:
        rows = [[len(t) + 1.0, sum(c in "aeiou" for c in t) + 1.0] for t in texts]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(rows), 2)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@hookimpl
def register_embedders(register: Callable[[Backend[Embedder]], None]) -> None:
    register(
        Backend(
            kind="embedder",
            name="example",
            schemes=("example",),
            factory=lambda spec, **options: LengthEmbedder(),
        )
    )


@contextmanager
def _fresh() -> Iterator[str]:
    yield "example://"


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    register(ConformanceTarget(backend="example", kind="vector", start=_fresh))
