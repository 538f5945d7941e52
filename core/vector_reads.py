"""Reading an index's vectors back through `VectorStore.query` alone, which every backend
answers exactly: those of given messages, and every one of them.

The contract has no read by id, so both ask for the vectors nearest to a probe
(any vector: every stored one scores) under a filter that bounds how many can
match, and split a request whose answer came back full.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from recallstack.core.batching import batched
from recallstack.core.vector_store import VectorStore
from recallstack.core.vectors import QueryResult

READ = 1_000
"""Vectors asked for per query."""
FOREVER = 2**53
"""Beyond any `created_at` in epoch milliseconds (and exact as a float)."""


def _probe(store: VectorStore, name: str) -> list[float]:
    return [1.0] * store.describe_index(name).dimension


def vectors_of(
    store: VectorStore, name: str, message_ids: Sequence[str], *, include_vector: bool = False
) -> list[QueryResult]:
    """Every vector (each chunk) of these messages in the index `name`."""
    probe = _probe(store, name)
    limit = min(store.capabilities.max_top_k, READ)
    found: list[QueryResult] = []
    todo = [list(g) for g in batched(message_ids, store.capabilities.max_filter_values)]
    while todo:
        group = todo.pop()
        where = {"message_id": {"$in": group}}
        hits = store.query(name, probe, limit, filter=where, include_vector=include_vector)
        if len(hits) >= limit and len(group) > 1:  # maybe cut short: ask by halves
            todo += [group[: len(group) // 2], group[len(group) // 2 :]]
            continue
        found += hits
    return found


def all_vectors(store: VectorStore, name: str) -> Iterator[list[QueryResult]]:
    """Every vector of the index, a bounded page at a time, by ranges of `created_at`
    (which every vector Memory writes carries) halved until each fits in a query.
    Raises `LookupError` when more than a query holds share one millisecond."""
    probe = _probe(store, name)
    limit = min(store.capabilities.max_top_k, READ)
    todo = [(-FOREVER, FOREVER)]
    while todo:
        low, high = todo.pop()
        where = {"created_at": {"$gte": low, "$lt": high}}
        hits = store.query(name, probe, limit, filter=where)
        if len(hits) < limit:
            yield hits
        elif high - low > 1:
            middle = (low + high) // 2
            todo += [(middle, high), (low, middle)]
        else:
            raise LookupError(f"{name}: more than {limit} vectors were made at {low} ms")
