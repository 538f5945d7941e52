"""Scoped queries (a resource, a thread) read their scope from the store's own index
(`memory://`, LibSQL): the answers stay those of the reference evaluator through
odd values under the scope keys, updates that move rows, deletes, and writes
by another store of the same file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.filters import matches, parse_filter

DIM = 8
SCOPED = [
    {"resource_id": "r1"},
    {"resource_id": "r2"},
    {"resource_id": "r9"},
    {"thread_id": "t3"},
    {"resource_id": "r1", "thread_id": "t3"},
    {"$and": [{"resource_id": "r2"}, {"n": {"$gte": 150}}]},
    {"resource_id": "r1", "thread_id": {"$in": ["t1", "t2"]}},
    {"resource_id": {"$eq": "r3"}, "$or": [{"n": 1}, {"n": {"$lt": 40}}]},
]


@pytest.fixture(params=["memory", "libsql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[VectorStore]]:
    """Two stores over the same data: one for reads, one for writes (for LibSQL, two
    stores of one file, as two processes would be)."""
    if request.param == "memory":
        store = InMemoryVectorStore()
        yield [store, store]
        return
    url = f"libsql:///{tmp_path / 'scoped.db'}"
    opened = [LibSQLVectorStore(url), LibSQLVectorStore(url)]
    yield list(opened)
    for store in opened:
        store.close()


class Mirror:
    """The rows as the reference sees them, written through to a store."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self.rows: dict[str, dict[str, Any]] = {}
        self.rng = np.random.default_rng(3)

    def upsert(self, rows: dict[str, dict[str, Any]]) -> None:
        vectors = self.rng.normal(size=(len(rows), DIM)).astype(np.float32)
        self.store.upsert("scoped", list(rows), vectors, list(rows.values()))
        self.rows.update(rows)

    def update(self, ids: list[str], metadata: dict[str, Any]) -> None:
        for i in ids:
            self.store.update("scoped", id=i, metadata=metadata)
        self.rows.update({i: metadata for i in ids})

    def delete(self, ids: list[str]) -> None:
        self.store.delete("scoped", ids=ids)
        for i in ids:
            del self.rows[i]


def check(reader: VectorStore, mirror: Mirror) -> None:
    probe = np.ones(DIM, dtype=np.float32)
    for document in SCOPED:
        node = parse_filter(document)
        expected = {i for i, metadata in mirror.rows.items() if matches(node, metadata)}
        found = reader.query("scoped", probe, top_k=1000, filter=document)
        assert {hit.id for hit in found} == expected, document
        assert all(matches(node, hit.metadata) for hit in found)


def test_a_scoped_query_gives_the_reference_answer(stores: list[VectorStore]) -> None:
    reader, writer = stores
    writer.create_index("scoped", DIM)
    mirror = Mirror(writer)
    mirror.upsert(
        {
            f"m{n:03d}": {"resource_id": f"r{n % 4}", "thread_id": f"t{n % 10}", "n": n}
            for n in range(200)
        }
    )
    check(reader, mirror)  # the first query loads the cache
    # values `$eq` reads differently: a list holding the value, others that never match
    mirror.upsert(
        {
            "list": {"resource_id": ["r1", "r2"], "thread_id": "t3", "n": 1},
            "number": {"resource_id": 1, "thread_id": "t3", "n": 2},
            "object": {"resource_id": "r1", "thread_id": {"t3": True}, "n": 3},
            "null": {"resource_id": None, "thread_id": "t3", "n": 4},
            "absent": {"thread_id": "t3", "n": 5},
        }
    )
    check(reader, mirror)  # rows appended to the cache
    moved = [i for i, m in mirror.rows.items() if m.get("thread_id") == "t3"][:12]
    mirror.update(moved, {"resource_id": "r9", "thread_id": "t9", "n": 7})
    check(reader, mirror)  # rows changed in place: the cache is copied
    mirror.update(["list"], {"resource_id": "r2", "thread_id": "t3", "n": 1})
    mirror.delete(["m001", "m005", "number"])
    check(reader, mirror)  # a delete reloads the cache
    mirror.upsert({"late": {"resource_id": "r1", "thread_id": "t3", "n": 9}})
    check(reader, mirror)
