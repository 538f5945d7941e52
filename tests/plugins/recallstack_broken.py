"""A deliberately wrong plugin: its `$ne` forgets that missing fields match.

The conformance suite must catch it and show a readable counterexample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from recallstack import Backend, ConformanceTarget, VectorStore, hookimpl
from recallstack.adapters.memory import CAPABILITIES
from recallstack.core.filters import Condition, Logical, Node, Not


def _break(node: Node) -> Node:
    if isinstance(node, Condition) and node.op == "$ne":
        return Logical("$and", (Condition(node.path, "$exists", True), node))
    if isinstance(node, Not):
        return Not(node.path, _break(node.child))
    if isinstance(node, Logical):
        return Logical(node.op, tuple(map(_break, node.children)))
    return node


def _store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.memory.vector import InMemoryVectorStore

    class BrokenStore(InMemoryVectorStore):
        backend = "broken"

        def _query(self, name: str, vector: Any, top_k: int, filter: Any, *rest: Any) -> Any:
            return super()._query(name, vector, top_k, filter and _break(filter), *rest)

    return BrokenStore()


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="broken",
            schemes=("broken",),
            factory=_store,
            capabilities=CAPABILITIES,
        )
    )


@contextmanager
def _fresh() -> Iterator[str]:
    yield "broken://"


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    register(ConformanceTarget(backend="broken", kind="vector", start=_fresh))
