"""A third-party recallstack plugin, as an outside author would write it.

It reuses the reference backend under its own name and scheme, and registers a
backend whose driver is not installed, to show the missing-extra error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from recallstack import Backend, Capabilities, ConformanceTarget, hookimpl


def _store(url: str, **options: Any) -> Any:
    from recallstack.adapters.memory.vector import InMemoryVectorStore

    class ExampleStore(InMemoryVectorStore):
        backend = "example"
        capabilities = Capabilities()

    return ExampleStore()


@hookimpl
def register_vector_stores(register: Callable[[Backend], None]) -> None:
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


@contextmanager
def _fresh() -> Iterator[str]:
    yield "example://"


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    register(ConformanceTarget(backend="example", kind="vector", start=_fresh))
