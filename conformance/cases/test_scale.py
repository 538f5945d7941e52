"""Group 10: the sizes real agents reach.

A long history imported in one call, a thread of thousands of messages, a
top_k in the hundreds, thousands of ids in one filter. No statement a backend
generates may grow with these (SQLite caps expression depth and compound
SELECTs, pgvector caps `hnsw.ef_search`), and the largest `top_k` a backend
accepts is declared in its capabilities and refused above, never a raw
driver error.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from recallstack.conformance.dataset import vectors
from recallstack.conformance.twin import Twin
from recallstack.core.api.memory import Memory
from recallstack.core.contracts.storage import Storage
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.records import Include, Thread
from recallstack.core.vectors import EVERYWHERE, Partition
from recallstack.embedders.hashing import HashEmbedder

T0 = datetime(2024, 1, 1, tzinfo=UTC)
BATCH = 5_000
LONG_THREAD = 3_000
MANY_VALUES = 10_000
Ids = Callable[[str], str]


def _messages(thread_id: str, count: int, prefix: str, start: int = 0) -> list[Message]:
    return [
        Message(
            id=f"{prefix}{i:05d}",
            thread_id=thread_id,
            role="user" if i % 2 else "assistant",
            content=f"note {i} about topic {i % 97}",
            created_at=T0 + timedelta(seconds=i),
        )
        for i in range(start, start + count)
    ]


# ---- vector stores ------------------------------------------------------------------


def _indexed(twin: Twin, count: int, dimension: int = 8) -> tuple[str, list[str]]:
    name = twin.index(dimension)
    ids = [f"m{i:05d}" for i in range(count)]
    data = vectors(count, dimension, seed=41)
    for r in range(3):  # three resources' partitions
        rows = range(r, count, 3)
        metadata = [{"message_id": ids[n], "n": n} for n in rows]
        twin.upsert(name, [ids[n] for n in rows], data[r::3], metadata, Partition(f"r{r}"))
    return name, ids


@pytest.mark.parametrize("count", [2_000, MANY_VALUES])
def test_in_and_nin_with_thousands_of_values(twin: Twin, count: int) -> None:
    """Up to the declared `max_filter_values` a long list is answered exactly;
    past it the filter is refused with `UnsupportedFilterError`."""
    name, ids = _indexed(twin, 1_200)
    query = vectors(1, 8, seed=42)[0]
    some = ids[::3] + [f"absent{i}" for i in range(count - len(ids[::3]))]
    numbers = list(range(0, 2 * count, 2))
    twin.check_filter(name, query, 500, {"message_id": {"$in": some}})
    twin.check_filter(name, query, 500, {"message_id": {"$nin": some}})
    twin.check_filter(name, query, 500, {"n": {"$in": numbers}})
    twin.check_filter(name, query, 50, {"n": {"$nin": numbers}}, partition=Partition("r1"))
    twin.check_filter(name, query, 50, {"n": {"$all": numbers}})


def test_delete_five_thousand_ids(twin: Twin) -> None:
    name, ids = _indexed(twin, BATCH + 1_000)
    twin.delete(name, ids=ids[:BATCH])
    assert twin.store.describe_index(name).count == 1_000
    twin.delete(name, filter={"message_id": {"$in": ids[BATCH : BATCH + 500]}})
    assert twin.store.describe_index(name).count == 500
    twin.query(name, vectors(1, 8, seed=43)[0], 600)


def test_top_k_up_to_the_declared_largest(twin: Twin) -> None:
    name, _ = _indexed(twin, 1_200)
    query = vectors(1, 8, seed=44)[0]
    assert len(twin.query(name, query, 1_000)) == 1_000
    assert len(twin.query(name, query, 1_000, partition=Partition("r0"))) == 400
    largest = twin.capabilities.max_top_k
    assert len(twin.store.query(name, query, largest, partition=EVERYWHERE)) == 1_200
    with pytest.raises(InvalidInputError, match="top_k"):
        twin.store.query(name, query, largest + 1, partition=EVERYWHERE)
    twin.record_refused(f"top_k above {largest:,}")


def test_thousands_of_tied_scores(twin: Twin) -> None:
    """Ties at the cut are ordered by id even when thousands tie (an ANN index
    cannot widen that far, so the backend must answer them exactly)."""
    name = twin.index(4)
    tied = BATCH + 500
    ids = [f"t{i:05d}" for i in range(tied)] + ["best", "worst"]
    rows = np.array([[1.0, 1.0, 0.0, 0.0]] * tied + [[1.0, 0.0, 0.0, 0.0], [0, 0, 1.0, 0]])
    twin.upsert(name, ids, rows, partition=Partition("r"))
    query = [1.0, 0.2, 0.0, 0.0]
    for top_k in (10, 300):
        hits = twin.query(name, query, top_k)
        assert [h.id for h in hits[:3]] == ["best", "t00000", "t00001"]
        hits = twin.query(name, query, top_k, partition=Partition("r"))
        assert [h.id for h in hits[:3]] == ["best", "t00000", "t00001"]


@pytest.mark.parametrize("memory_api", ["Memory"], indirect=True)  # async: test_async_memory
def test_memory_saves_updates_and_deletes_thousands(memory_over_vector: Memory) -> None:
    """Memory over the backend: one save of 5,000 messages, a 3,000-message thread's
    metadata re-copied to every vector, and 5,000 messages deleted in one call."""
    memory = memory_over_vector
    assert memory.semantic is not None
    store, name = memory.semantic.vector, memory.semantic.index_name()
    memory.create_thread("owner", thread_id="long")
    memory.create_thread("owner", thread_id="other")
    batch = _messages("long", LONG_THREAD, "a") + _messages("other", BATCH - LONG_THREAD, "b")
    saved = memory.save_messages(batch)
    assert (len(saved.indexed), saved.not_indexed) == (BATCH, [])
    store.wait_until_consistent(name)
    assert store.describe_index(name).count == BATCH
    again = batch[::5]  # saving again overwrites, never duplicates
    assert memory.save_messages(again).not_indexed == []
    store.wait_until_consistent(name)
    assert store.describe_index(name).count == BATCH

    updated = memory.update_thread("long", metadata={"topic": "boats"})
    assert (len(updated.indexed), updated.not_indexed) == (LONG_THREAD, [])
    store.wait_until_consistent(name)
    query = HashEmbedder(32).embed(["note about topic"])[0]
    boats = store.query(name, query, BATCH, filter={"topic": "boats"}, partition=EVERYWHERE)
    assert {h.metadata["message_id"] for h in boats} == {m.id for m in batch[:LONG_THREAD]}
    assert all(h.metadata["thread_id"] == "long" for h in boats)

    memory.delete_messages([m.id for m in batch])
    store.wait_until_consistent(name)
    assert store.describe_index(name).count == 0


# ---- storages -----------------------------------------------------------------------


def _windows(thread: list[Message], targets: list[int], before: int, after: int) -> set[str]:
    return {m.id for t in targets for m in thread[max(0, t - before) : t + after + 1]}


def test_a_thousand_message_windows(storage: Storage, ids: Ids) -> None:
    """Message windows of 1,002 targets in three threads of one resource (one more of
    another resource, which must not come back)."""
    rid = ids("scale-r")
    threads = [ids(f"scale-t{k}") for k in range(3)]
    other = ids("scale-other")
    for t in threads:
        storage.save_thread(Thread(id=t, resource_id=rid))
    storage.save_thread(Thread(id=other, resource_id=ids("scale-r2")))
    by_thread = {t: _messages(t, LONG_THREAD // 3, f"{t}-m") for t in threads}
    storage.save_messages([m for ms in by_thread.values() for m in ms])
    storage.save_messages(_messages(other, 10, f"{other}-m"))
    targets = {t: list(range(0, LONG_THREAD // 3, 3)) for t in threads}  # 1,002 targets
    include = [
        Include(id=by_thread[t][i].id, before=2, after=2) for t in threads for i in targets[t]
    ]
    include.append(Include(id=f"{other}-m00003", before=2, after=2))  # another resource's
    windows = storage.message_windows(include, resource_id=rid)
    expected = set().union(*(_windows(by_thread[t], targets[t], 2, 2) for t in threads))
    assert {m.id for m in windows} == expected


@pytest.mark.parametrize("memory_api", ["Memory"], indirect=True)  # async: test_async_memory
def test_recall_with_top_k_1000_and_neighbours(memory_over_storage: Memory, ids: Ids) -> None:
    memory = memory_over_storage
    rid = ids("recall-r")
    thread_id = ids("recall-t")
    config = {"semantic_recall": {"top_k": 1_000, "message_range": 2}, "last_messages": 0}
    memory.create_thread(rid, thread_id=thread_id)
    thread = _messages(thread_id, LONG_THREAD, f"{thread_id}-m")
    assert memory.save_messages(thread).not_indexed == []
    result = memory.recall(
        thread_id, vector_search_string="note about topic 5", per_page=0, thread_config=config
    )
    assert len(result.hits) == 1_000
    position = {m.id: n for n, m in enumerate(thread)}
    targets = [position[h.message_id] for h in result.hits]
    assert {m.id for m in result.messages} == _windows(thread, targets, 2, 2)
