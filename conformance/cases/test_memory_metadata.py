"""Group 7: the partition (a resource, or one of its threads) bounds every call, and the
reserved keys memory writes are filterable within it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from recallstack.conformance.dataset import vectors
from recallstack.conformance.twin import Twin
from recallstack.core.errors import InvalidInputError
from recallstack.core.metadata import epoch_ms
from recallstack.core.vectors import EVERYWHERE, Partition

ALICE, BOB = Partition("alice"), Partition("bob")


def _memory_index(twin: Twin) -> str:
    """Two resources of three threads of four messages, each thread written in its
    partition, as Memory writes them; and one vector written in none."""
    name = twin.index(6)
    data = vectors(25, 6, seed=21)
    n = 0
    for r in ("alice", "bob"):
        for t in range(3):
            rows: list[dict[str, Any]] = [
                {
                    "message_id": f"{r}-{t}-{m}",
                    "role": "user" if m % 2 == 0 else "assistant",
                    "created_at": epoch_ms(datetime(2024, 1, 1 + t, m, tzinfo=UTC)),
                    "chunk": 0,
                    "project": "x" if t == 0 else "y",
                }
                for m in range(4)
            ]
            ids = [row["message_id"] for row in rows]
            twin.upsert(name, ids, data[n : n + 4], rows, partition=Partition(r, f"{r}-t{t}"))
            n += 4
    twin.upsert(name, ["nobody"], data[24:], [{"project": "x"}], partition=EVERYWHERE)
    return name


QUERY = vectors(1, 6, seed=22)[0]


def _stored(twin: Twin, name: str) -> list[tuple[str, dict[str, Any]]]:
    """Every vector's id and metadata (scores aside: an engine may round them otherwise
    from one query to the next)."""
    return [(h.id, h.metadata) for h in twin.query(name, QUERY, 100, partition=EVERYWHERE)]


def test_resource_partition_is_exact(twin: Twin) -> None:
    name = _memory_index(twin)
    hits = twin.query(name, QUERY, 100, partition=ALICE)
    assert len(hits) == 12
    assert {h.metadata["resource_id"] for h in hits} == {"alice"}


def test_thread_partition_is_exact(twin: Twin) -> None:
    name = _memory_index(twin)
    hits = twin.query(name, QUERY, 100, partition=Partition("bob", "bob-t1"))
    assert {h.id for h in hits} == {f"bob-1-{m}" for m in range(4)}
    assert {h.metadata["thread_id"] for h in hits} == {"bob-t1"}


def test_a_thread_of_another_resource_is_empty(twin: Twin) -> None:
    name = _memory_index(twin)
    assert twin.query(name, QUERY, 100, partition=Partition("alice", "bob-t1")) == []
    assert twin.query(name, QUERY, 100, partition=Partition("carol")) == []


def test_every_reserved_key_is_filterable(twin: Twin) -> None:
    name = _memory_index(twin)
    twin.query(name, QUERY, 100, filter={"message_id": "alice-0-0"}, partition=ALICE)
    twin.query(name, QUERY, 100, filter={"role": "assistant"}, partition=BOB)
    twin.query(name, QUERY, 100, filter={"chunk": 0}, partition=Partition("alice", "alice-t2"))
    since = epoch_ms(datetime(2024, 1, 2, tzinfo=UTC))
    twin.query(name, QUERY, 100, filter={"created_at": {"$gte": since}}, partition=ALICE)
    twin.query(name, QUERY, 100, filter={"thread_id": {"$ne": "alice-t0"}}, partition=ALICE)


def test_partition_and_user_filter_combined(twin: Twin) -> None:
    name = _memory_index(twin)
    hits = twin.query(name, QUERY, 4, filter={"project": "x"}, partition=ALICE)
    assert {h.metadata["thread_id"] for h in hits} == {"alice-t0"}


def test_one_resource_never_sees_another(twin: Twin) -> None:
    name = _memory_index(twin)
    for top_k in (1, 5, 50):
        hits = twin.query(name, QUERY, top_k, partition=BOB)
        assert all(h.metadata["resource_id"] == "bob" for h in hits)


def test_a_vector_written_in_no_partition_is_only_found_everywhere(twin: Twin) -> None:
    name = _memory_index(twin)
    for partition in (ALICE, BOB):
        hits = twin.query(name, QUERY, 100, filter={"project": "x"}, partition=partition)
        assert "nobody" not in {h.id for h in hits}
    everywhere = twin.query(name, QUERY, 100, filter={"project": "x"}, partition=EVERYWHERE)
    assert "nobody" in {h.id for h in everywhere}
    assert len(everywhere) == 9


def test_deletes_and_updates_reach_their_partition_and_keep_it(twin: Twin) -> None:
    name = _memory_index(twin)
    twin.delete(name, ids=["bob-0-0", "alice-0-0"], partition=ALICE)
    twin.delete(name, filter={"project": "x"}, partition=BOB)
    twin.update(name, filter={"role": "user"}, metadata={"seen": True}, partition=ALICE)
    twin.update(name, id="bob-1-1", metadata={"seen": True}, partition=ALICE)
    twin.update(name, id="nobody", metadata={"seen": 1}, partition=EVERYWHERE)
    left = {h.id: h.metadata for h in twin.query(name, QUERY, 100, partition=EVERYWHERE)}
    assert "alice-0-0" not in left and "bob-0-1" not in left
    # new metadata replaces all but the partition the vector was written in
    assert left["alice-1-0"] == {"seen": True, "resource_id": "alice", "thread_id": "alice-t1"}
    assert left["nobody"] == {"seen": 1}
    assert "seen" not in left["bob-1-1"] and left["bob-1-1"]["thread_id"] == "bob-t1"


def test_written_again_in_another_thread_a_vector_moves(twin: Twin) -> None:
    name = _memory_index(twin)
    moved = {"message_id": "alice-0-1", "chunk": 0}
    twin.upsert(name, ["alice-0-1"], [QUERY], [moved], partition=Partition("alice", "alice-t2"))
    old = twin.query(name, QUERY, 100, partition=Partition("alice", "alice-t0"))
    new = twin.query(name, QUERY, 100, partition=Partition("alice", "alice-t2"))
    assert "alice-0-1" not in {h.id for h in old}
    assert new[0].id == "alice-0-1" and new[0].metadata["thread_id"] == "alice-t2"


@pytest.mark.parametrize("key", ["resource_id", "thread_id"])
def test_metadata_naming_a_partition_key_is_refused(twin: Twin, key: str) -> None:
    name = _memory_index(twin)
    before = _stored(twin, name)
    for partition in (ALICE, EVERYWHERE):
        with pytest.raises(InvalidInputError, match=key):
            twin.store.upsert(
                name, ["new", "alice-1-1"], [QUERY, QUERY], [{}, {key: "x"}], partition=partition
            )
        with pytest.raises(InvalidInputError, match=key):
            twin.store.update(name, id="alice-1-1", metadata={key: "x"}, partition=partition)
    assert _stored(twin, name) == before


@pytest.mark.parametrize("bad", [Partition, "", "alice", {"resource_id": "alice"}, None])
def test_a_partition_must_be_one(twin: Twin, bad: Any) -> None:
    name = _memory_index(twin)
    with pytest.raises(InvalidInputError, match="partition"):
        twin.store.query(name, QUERY, 1, partition=bad)
    with pytest.raises(InvalidInputError, match="partition"):
        twin.store.delete(name, ids=["alice-1-1"], partition=bad)
    assert len(twin.query(name, QUERY, 100, partition=ALICE)) == 12


@pytest.mark.parametrize("ids", [("", None), ("alice", ""), ("a\x00b", None), (7, None)])
def test_a_partition_of_bad_ids_is_refused(ids: tuple[Any, Any]) -> None:
    with pytest.raises(InvalidInputError, match="partition"):
        Partition(*ids)
