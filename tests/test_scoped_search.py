"""Partitioned queries (a resource, a thread) read their partition from the store's own
index (`memory://`, LibSQL): the answers stay those of the reference evaluator
through rows in no partition, rows written again elsewhere, updates, deletes, and
writes by another store of the same file."""

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
from recallstack.core.vectors import EVERYWHERE, Partition, Reach, keeping_partition

DIM = 8
CASES: list[tuple[Reach, dict[str, Any] | None]] = [
    (Partition("r1"), None),
    (Partition("r2"), None),
    (Partition("r9"), None),
    (Partition("r1", "t3"), None),
    (Partition("r2"), {"n": {"$gte": 150}}),
    (Partition("r1"), {"thread_id": {"$in": ["t1", "t2"]}}),
    (Partition("r3"), {"$or": [{"n": 1}, {"n": {"$lt": 40}}]}),
    (EVERYWHERE, {"n": {"$lt": 10}}),
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

    def upsert(self, rows: dict[str, dict[str, Any]], partition: Reach) -> None:
        vectors = self.rng.normal(size=(len(rows), DIM)).astype(np.float32)
        self.store.upsert("scoped", list(rows), vectors, list(rows.values()), partition=partition)
        fields = partition.fields() if isinstance(partition, Partition) else {}
        self.rows.update({i: {**m, **fields} for i, m in rows.items()})

    def update(self, ids: list[str], metadata: dict[str, Any]) -> None:
        for i in ids:
            self.store.update("scoped", id=i, metadata=metadata, partition=EVERYWHERE)
        self.rows.update({i: keeping_partition(metadata, self.rows[i]) for i in ids})

    def delete(self, ids: list[str]) -> None:
        self.store.delete("scoped", ids=ids, partition=EVERYWHERE)
        for i in ids:
            del self.rows[i]


def check(reader: VectorStore, mirror: Mirror) -> None:
    probe = np.ones(DIM, dtype=np.float32)
    for partition, document in CASES:
        node = None if document is None else parse_filter(document)
        expected = {
            i
            for i, metadata in mirror.rows.items()
            if (not isinstance(partition, Partition) or partition.holds(metadata))
            and matches(node, metadata)
        }
        found = reader.query("scoped", probe, top_k=1000, filter=document, partition=partition)
        assert {hit.id for hit in found} == expected, (partition, document)
        assert all(mirror.rows[hit.id] == hit.metadata for hit in found)


def test_a_partitioned_query_gives_the_reference_answer(stores: list[VectorStore]) -> None:
    reader, writer = stores
    writer.create_index("scoped", DIM)
    mirror = Mirror(writer)
    for n in range(200):
        partition = Partition(f"r{n % 4}", f"t{n % 10}")
        mirror.upsert({f"m{n:03d}": {"n": n}}, partition)
    check(reader, mirror)  # the first query loads the cache
    # rows in a resource's partition with no thread, and in none at all
    mirror.upsert({"resource only": {"n": 1}, "also": {"n": 2}}, Partition("r1"))
    mirror.upsert({"nowhere": {"n": 3}, "thread_id": {"n": 4}}, EVERYWHERE)
    check(reader, mirror)  # rows appended to the cache
    moved = [i for i, m in mirror.rows.items() if m.get("thread_id") == "t3"][:12]
    for i in moved:  # written again in another partition: the rows move
        mirror.upsert({i: {"n": 7}}, Partition("r9", "t9"))
    check(reader, mirror)  # rows changed in place: the cache is copied
    mirror.update(["also", "m002"], {"n": 150})  # their partitions stay
    mirror.delete(["m001", "m005", "nowhere"])
    check(reader, mirror)  # a delete reloads the cache
    mirror.upsert({"late": {"n": 9}}, Partition("r1", "t3"))
    check(reader, mirror)
