"""Reading an index's vectors back: those of given messages, by id (`VectorStore.get`);
and every one of them, for which the contract has no listing, through `query`.

`all_vectors` asks for the vectors nearest to a probe (any vector: every stored
one scores) under a range of `created_at` that bounds how many can match, and
splits a range whose answer came back full.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.recall.records import chunk_id
from recallstack.core.vectors import EVERYWHERE, QueryResult, StoredVector

READ = 1_000
"""Vectors asked for per query."""
WIDEST = 64
"""The most chunk numbers of one message `message_vectors` asks for at a time."""
FOREVER = 2**53
"""Beyond any `created_at` in epoch milliseconds (and exact as a float)."""


def held_messages(store: VectorStore, name: str, message_ids: Sequence[str]) -> set[str]:
    """Of these messages, those with a vector in the index `name`: each has `<id>` (one
    chunk) or `<id>#0` (several) if it has any (`recall.records.chunk_id`)."""
    asked = [c for i in message_ids for c in (chunk_id(i, 0, 1), chunk_id(i, 0, 2))]
    return {str(v.metadata.get("message_id")) for v in store.get(name, asked)} & set(message_ids)


def message_vectors(
    store: VectorStore, name: str, message_ids: Sequence[str]
) -> list[StoredVector]:
    """Every vector (each chunk) of these messages in the index `name`, read by id: a
    message's chunks are numbered from 0 with no gap (a save deletes those past its
    count), so each message's are read in growing windows until one comes back short."""
    wanted = set(message_ids)
    first = [c for i in message_ids for c in (chunk_id(i, 0, 1), chunk_id(i, 0, 2))]
    found = [v for v in store.get(name, first) if v.metadata.get("message_id") in wanted]
    several = {str(v.metadata["message_id"]) for v in found if v.id != v.metadata["message_id"]}
    todo = dict.fromkeys(several, 1)  # the next chunk number to read
    width = 1
    while todo:
        width = min(2 * width, WIDEST)
        asked = [
            chunk_id(i, k, 2) for i, start in todo.items() for k in range(start, start + width)
        ]
        got = {v.id: v for v in store.get(name, asked) if v.metadata.get("message_id") in todo}
        found += got.values()
        todo = {
            i: start + width
            for i, start in todo.items()
            if all(chunk_id(i, k, 2) in got for k in range(start, start + width))
        }
    return found


def all_vectors(store: VectorStore, name: str) -> Iterator[list[QueryResult]]:
    """Every vector of the index, a bounded page at a time, by ranges of `created_at`
    (which every vector Memory writes carries) halved until each fits in a query.
    Raises `LookupError` when more than a query holds share one millisecond."""
    probe = [1.0] * store.describe_index(name).dimension
    limit = min(store.capabilities.max_top_k, READ)
    todo = [(-FOREVER, FOREVER)]
    while todo:
        low, high = todo.pop()
        where = {"created_at": {"$gte": low, "$lt": high}}
        hits = store.query(name, probe, limit, filter=where, partition=EVERYWHERE)
        if len(hits) < limit:
            yield hits
        elif high - low > 1:
            middle = (low + high) // 2
            todo += [(middle, high), (low, middle)]
        else:
            raise LookupError(f"{name}: more than {limit} vectors were made at {low} ms")
