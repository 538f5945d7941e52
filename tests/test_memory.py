"""Memory end to end: every rule of docs/spec/semantic-recall.md, on every landed backend."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from backends import BACKENDS, make_backends

from recallstack.adapters.libsql.storage import LibSQLStorage
from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.api.memory import Memory
from recallstack.core.contracts.embedder import Embedder, index_name
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import InvalidInputError, NotFoundError, UnsupportedFeatureError
from recallstack.core.messages import Message
from recallstack.core.records import Include
from recallstack.core.vectors import EVERYWHERE, Matrix, Partition
from recallstack.embedders.hashing import HashEmbedder

T0 = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
# The semantic signal alone: these tests pin its mechanics (hybrid recall, the default,
# is tested in test_contextual_vectors.py and below)
RECALL = {"semantic_recall": {"top_k": 2, "message_range": 1, "scope": "resource", "hybrid": False}}


@pytest.fixture(params=BACKENDS)
def backends(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Storage, VectorStore]:
    return make_backends(request.param, request, tmp_path)


def conversation(memory: Memory) -> None:
    """Ada (two threads) and Bob (one thread), with lexically distinct topics."""
    memory.create_thread(
        "ada", thread_id="trip", title="Trip planning", metadata={"topic": "travel"}
    )
    memory.create_thread("ada", thread_id="cook", title="Cooking", metadata={"topic": "food"})
    memory.create_thread("bob", thread_id="bob-1", title="Bob's thread")
    lines = {
        "trip": [
            ("user", "I want to visit Lisbon in spring"),
            ("assistant", "Lisbon in April is lovely, pack light layers"),
            ("user", "book a hotel near the river in Lisbon"),
            ("assistant", "I found three hotels by the Tagus river"),
            ("user", "what about train tickets to Porto"),
        ],
        "cook": [
            ("user", "my sourdough bread came out flat"),
            ("assistant", "your starter may be weak, feed it twice a day"),
            ("user", "how long should the dough proof overnight"),
        ],
        "bob-1": [
            ("user", "Bob secret: the Lisbon hotel password is swordfish"),
            ("assistant", "noted, Bob"),
        ],
    }
    minute = 0
    for thread, turns in lines.items():
        memory.save_messages(
            [
                Message(
                    id=f"{thread}-{i}",
                    thread_id=thread,
                    role=role,  # type: ignore[arg-type]
                    content=text,
                    created_at=T0 + timedelta(minutes=(minute := minute + 1)),
                )
                for i, (role, text) in enumerate(turns)
            ]
        )


def memory_on(backends: tuple[Storage, VectorStore], options: Any = RECALL, **kw: Any) -> Memory:
    storage, vector = backends
    return Memory(storage, vector, kw.pop("embedder", HashEmbedder(384)), options, **kw)


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


# ---- end to end, identical on every backend ---------------------------------------------


def recall_summary(memory: Memory) -> dict[str, Any]:
    conversation(memory)
    result = memory.recall("cook", vector_search_string="which hotel did we book in Lisbon")
    return {
        "hits": [(h.message_id, round(h.score, 4)) for h in result.hits],
        "messages": ids(result.messages),
        "sources": [m.source for m in result.messages],
    }


def test_recall_end_to_end(backends: tuple[Storage, VectorStore]) -> None:
    summary = recall_summary(memory_on(backends))
    # the hotel message of Ada's other thread is the best hit; Bob's never appears
    assert summary["hits"][0][0] == "trip-2"
    assert all(not h.startswith("bob") for h, _ in summary["hits"])
    # the history page (3 newest of "cook") plus each hit with one neighbour either side
    assert {"cook-0", "cook-1", "cook-2", "trip-1", "trip-2", "trip-3"} <= set(summary["messages"])
    assert not any(m.startswith("bob") for m in summary["messages"])


def test_search_a_whole_resource_without_a_thread(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    conversation(memory)
    hits = memory.search("ada", "Lisbon hotel by the river", top_k=3)
    assert hits[0].message.id == "trip-2"
    assert len(hits) == 3 and all(h.message.resource_id == "ada" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    newest = memory.search("ada", "how long should the dough proof overnight", top_k=1)
    assert newest[0].message.id == "cook-2"  # no history page is excluded
    only_cook = memory.search("ada", "Lisbon hotel", thread_id="cook", top_k=5)
    assert {h.message.thread_id for h in only_cook} == {"cook"}
    answers = memory.search("ada", "Lisbon", filter={"role": "assistant"}, top_k=10)
    assert answers and {h.message.role for h in answers} == {"assistant"}
    assert memory.search("ada", "Lisbon", threshold=1.01) == []
    assert [h.message.id for h in memory.search("bob", "Lisbon hotel", top_k=5)] == [
        "bob-1-0",
        "bob-1-1",
    ]
    with pytest.raises(NotFoundError, match="no thread 'bob-1'"):
        memory.search("ada", "Lisbon", thread_id="bob-1")
    with pytest.raises(InvalidInputError):
        memory.search({"$ne": "x"}, "Lisbon")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="top_k"):
        memory.search("ada", "Lisbon", top_k=0)


class SameVector(HashEmbedder):
    """Every text gets the same vector: the semantic signal ties, by id."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.tile(np.eye(self.dimension, dtype=np.float32)[0], (len(texts), 1))


def test_hybrid_recall_fuses_a_keyword_signal() -> None:
    options = {"semantic_recall": {"top_k": 4, "hybrid": {"context": 0, "candidates": 10}}}
    memory = Memory("memory://", "memory://", SameVector(8), options)
    memory.create_thread("ada", thread_id="t")
    memory.create_thread("bob", thread_id="u")
    lines = [
        ("a", "user", "quiet evening"),
        ("b", "user", "hotel by the river"),
        ("c", "assistant", "the Lisbon tram"),
        ("d", "user", "Lisbon hotel, Lisbon!"),
    ]
    memory.save_messages(
        [Message(id=i, thread_id="t", role=r, content=c) for i, r, c in lines]  # type: ignore[arg-type]
    )
    memory.save_messages([Message(id="x", thread_id="u", role="user", content="Lisbon hotel")])
    hits = memory.search("ada", "Lisbon hotel")
    assert [h.message.id for h in hits] == ["d", "b", "c", "a"]  # "a" only ties semantically
    assert hits[-1].keyword_score is None and hits[-1].dense_score == pytest.approx(1.0)
    assert all(h.keyword_score and h.dense_score for h in hits[:3])
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    users = memory.search("ada", "Lisbon hotel", filter={"role": "user"})
    assert [h.message.id for h in users] == ["d", "b", "a"]  # the filter holds on both signals
    assert memory.search("ada", "Lisbon hotel", threshold=1.5) == []  # a floor on similarity
    recalled = memory.recall("t", "ada", "Lisbon hotel", per_page=0)
    assert [h.message_id for h in recalled.hits] == ["d", "b", "c", "a"]


class NoWords(InMemoryStorage):
    keyword_search = False


def test_hybrid_recall_needs_keyword_search() -> None:
    memory = Memory(NoWords(), "memory://", HashEmbedder(8), {"semantic_recall": {"hybrid": True}})
    memory.create_thread("ada", thread_id="t")
    memory.save_messages([Message(id="m", thread_id="t", role="user", content="Lisbon")])
    with pytest.raises(UnsupportedFeatureError, match="memory storage has no keyword search"):
        memory.search("ada", "Lisbon")


def test_the_default_is_hybrid_with_context_where_storage_has_keyword_search() -> None:
    """`semantic_recall: True` means hybrid recall with contextual vectors; on a storage
    without keyword search, the semantic signal alone (asked by name, hybrid is refused,
    above)."""
    for storage, expected in ((InMemoryStorage(), {"_context1"}), (NoWords(), set())):
        memory = Memory(storage, "memory://", HashEmbedder(8), {"semantic_recall": True})
        memory.create_thread("ada", thread_id="t")
        memory.save_messages(
            [Message(id=f"m{i}", thread_id="t", role="user", content="Lisbon") for i in range(2)]
        )
        assert memory.semantic is not None
        main = memory.semantic.index_name()
        assert {n.removeprefix(main) for n in memory.vector.list_indexes()} == {"", *expected}  # type: ignore[union-attr]
        (hit, _) = memory.search("ada", "Lisbon")
        assert (hit.keyword_score is not None) is bool(expected)
        assert (hit.context_score is not None) is bool(expected)


def test_every_backend_gives_identical_results(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    results = []
    for kind in BACKENDS:
        memory = memory_on(make_backends(kind, request, tmp_path / kind))
        summary = recall_summary(memory)
        found = memory.search("ada", "which hotel did we book in Lisbon", top_k=4)
        summary["search"] = [(h.message.id, round(h.score, 4)) for h in found]
        results.append(summary)
    assert all(result == results[0] for result in results)


# ---- the regressions of semantic-recall.md §9 ------------------------------------------


def test_index_name_has_model_and_dimension_on_every_path(
    backends: tuple[Storage, VectorStore],
) -> None:
    memory = memory_on(backends, embedder=HashEmbedder(384))
    conversation(memory)
    expected = index_name("hash-384", 384)
    assert memory.semantic is not None
    assert memory.semantic.index_name() == expected
    assert backends[1].list_indexes() == [expected]
    assert memory.recall("trip", vector_search_string="Lisbon hotel").hits


def test_switching_embedder_never_mixes_vectors(backends: tuple[Storage, VectorStore]) -> None:
    conversation(memory_on(backends, embedder=HashEmbedder(384)))
    switched = memory_on(backends, embedder=HashEmbedder(128))
    assert switched.recall("trip", vector_search_string="Lisbon hotel").hits == []
    assert sorted(backends[1].list_indexes()) == [index_name("hash-384", 384)]
    result = switched.reindex()
    assert (result.indexed, result.failed) == (10, 0)
    assert backends[1].describe_index(index_name("hash-128", 128)).count == 10
    assert backends[1].describe_index(index_name("hash-384", 384)).count == 10
    assert switched.recall("trip", vector_search_string="Lisbon hotel").hits


def test_explicit_index_name_applies_everywhere(backends: tuple[Storage, VectorStore]) -> None:
    options = {"semantic_recall": {"index_name": "my_index", "top_k": 1}}
    memory = memory_on(backends, options)
    conversation(memory)
    assert sorted(backends[1].list_indexes()) == ["my_index", "my_index_context1"]
    assert memory.recall("trip", vector_search_string="Lisbon hotel").hits
    memory.delete_thread("trip")
    assert backends[1].describe_index("my_index").count == 5
    assert backends[1].describe_index("my_index_context1").count == 5


def test_threshold_applies_to_recall(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    conversation(memory)
    query = "book a hotel near the river in Lisbon"
    loose = memory.recall("trip", vector_search_string=query).hits
    assert loose[0].score == pytest.approx(1.0)
    strict = memory.recall(
        "trip", vector_search_string=query, thread_config={"semantic_recall": {"threshold": 0.99}}
    ).hits
    assert [h.message_id for h in strict] == ["trip-2"]
    assert len(loose) == 2


def test_resource_b_never_sees_resource_a(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends, {"semantic_recall": {"top_k": 10, "message_range": 5}})
    conversation(memory)
    result = memory.recall("bob-1", vector_search_string="Lisbon hotel river spring sourdough")
    assert {h.thread_id for h in result.hits} == {"bob-1"}
    assert set(ids(result.messages)) == {"bob-1-0", "bob-1-1"}
    ada = memory.recall("trip", vector_search_string="Bob secret password swordfish")
    assert not any(m.startswith("bob") for m in ids(ada.messages))


def test_thread_scope(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends, {"semantic_recall": {"scope": "thread", "top_k": 3}})
    conversation(memory)
    hits = memory.recall("cook", vector_search_string="Lisbon hotel").hits
    assert {h.thread_id for h in hits} == {"cook"}


def test_resource_scope_needs_a_resource(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    with pytest.raises(InvalidInputError, match="needs a resource_id"):
        memory.recall("no-such-thread", vector_search_string="anything")
    conversation(memory)
    with pytest.raises(InvalidInputError, match="another resource"):
        memory.recall("trip", resource_id="bob", vector_search_string="hotel")


def test_filter_and_thread_metadata(backends: tuple[Storage, VectorStore]) -> None:
    options = {"semantic_recall": {"top_k": 5, "filter": {"topic": "food"}}}
    memory = memory_on(backends, options)
    conversation(memory)
    hits = memory.recall("trip", vector_search_string="Lisbon hotel bread").hits
    assert hits and {h.thread_id for h in hits} == {"cook"}


def test_reserved_keys_win_over_thread_metadata(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    memory.create_thread("ada", thread_id="t", metadata={"thread_id": "evil", "role": "x", "k": 1})
    memory.save_messages([Message(id="m", thread_id="t", role="user", content="hello there")])
    (hit,) = backends[1].query(
        memory.semantic.index_name(),  # type: ignore[union-attr]
        HashEmbedder(384).embed(["hello"])[0],
        1,
        partition=EVERYWHERE,
    )
    assert hit.metadata["thread_id"] == "t"
    assert hit.metadata["role"] == "user"
    assert hit.metadata["resource_id"] == "ada"
    assert hit.metadata["k"] == 1
    assert hit.metadata["created_at"] == int(hit.metadata["created_at"])


def test_saving_twice_never_duplicates(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    conversation(memory)
    conversation(memory)
    assert backends[1].describe_index(memory.semantic.index_name()).count == 10  # type: ignore[union-attr]


def test_long_messages_are_chunked(backends: tuple[Storage, VectorStore]) -> None:
    embedder = HashEmbedder(384)
    embedder.max_input = 8  # words, this embedder's tokens
    memory = memory_on(backends, embedder=embedder)
    memory.create_thread("ada", thread_id="t")
    long = "alpha " * 10 + "zebra crossing " + "omega " * 10
    memory.save_messages([Message(id="long", thread_id="t", role="user", content=long)])
    name = memory.semantic.index_name()  # type: ignore[union-attr]
    count = backends[1].describe_index(name).count
    assert count > 1
    hits = memory.recall("t", vector_search_string="alpha zebra omega").hits
    assert [h.message_id for h in hits] == ["long"]  # chunks of one message are one hit
    memory.update_messages([Message(id="long", thread_id="t", role="user", content="short now")])
    assert backends[1].describe_index(name).count == 1


def test_update_re_embeds_and_delete_removes_vectors(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    conversation(memory)
    name = memory.semantic.index_name()  # type: ignore[union-attr]
    memory.update_messages(
        [
            Message(
                id="trip-2",
                thread_id="trip",
                role="user",
                content="kayak rental on the coast",
                created_at=T0 + timedelta(minutes=3),
            )
        ]
    )
    hits = memory.recall("trip", vector_search_string="kayak rental").hits
    assert hits[0].message_id == "trip-2"
    with pytest.raises(NotFoundError):
        memory.update_messages([Message(id="ghost", thread_id="trip", role="user", content="x")])
    memory.delete_messages(["trip-2", "trip-3"])
    assert backends[1].describe_index(name).count == 8
    memory.delete_thread("cook")
    assert backends[1].describe_index(name).count == 5
    assert memory.get_thread("cook") is None


def test_deleting_reaches_vectors_of_an_old_embedder(backends: tuple[Storage, VectorStore]) -> None:
    conversation(memory_on(backends, embedder=HashEmbedder(384)))
    switched = memory_on(backends, embedder=HashEmbedder(128))
    switched.delete_thread("trip")
    assert backends[1].describe_index(index_name("hash-384", 384)).count == 5


def test_update_thread_metadata_reaches_vectors(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends, {"semantic_recall": {"top_k": 5, "filter": {"topic": "boats"}}})
    conversation(memory)
    assert memory.recall("trip", vector_search_string="Lisbon").hits == []
    memory.update_thread("trip", metadata={"topic": "boats"})
    assert {h.thread_id for h in memory.recall("trip", vector_search_string="Lisbon").hits} == {
        "trip"
    }


def test_bad_thread_metadata_is_refused_before_writing(
    backends: tuple[Storage, VectorStore],
) -> None:
    memory = memory_on(backends)
    with pytest.raises(InvalidInputError, match="thread metadata"):
        memory.create_thread("ada", thread_id="t", metadata={"a.b": 1})
    assert memory.get_thread("t") is None


def test_pagination(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends, {"last_messages": 2})
    conversation(memory)
    newest = memory.recall("trip")
    assert ids(newest.messages) == ["trip-3", "trip-4"]
    assert (newest.total, newest.per_page, newest.has_more) == (5, 2, True)
    older = memory.recall("trip", page=1)
    assert ids(older.messages) == ["trip-1", "trip-2"]
    assert ids(memory.recall("trip", per_page=10).messages) == [f"trip-{i}" for i in range(5)]
    assert memory.recall("trip", thread_config={"last_messages": False}).messages == []


# ---- reliability: storage first, failures reported and repaired ---------------------------


class Flaky(Embedder):
    """An embedder that fails while `broken` is set (fault injection, not the thing tested)."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(384)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.broken = True

    def embed(self, texts: Sequence[str]) -> Matrix:
        if self.broken:
            raise ConnectionError("embedding service unavailable")
        return self.inner.embed(texts)


def test_embedder_failure_keeps_messages_and_reindex_repairs(
    backends: tuple[Storage, VectorStore], caplog: pytest.LogCaptureFixture
) -> None:
    flaky = Flaky()
    memory = memory_on(backends, embedder=flaky)
    memory.create_thread("ada", thread_id="t")
    batch = [Message(id=f"m{i}", thread_id="t", role="user", content=f"note {i}") for i in range(3)]
    with caplog.at_level(logging.ERROR):
        result = memory.save_messages(batch)
    assert result.not_indexed == ["m0", "m1", "m2"]
    assert "embedding service unavailable" in (result.error or "")
    assert "indexing 3 messages failed" in caplog.text
    assert ids(memory.recall("t", per_page=10).messages) == ["m0", "m1", "m2"]
    assert memory.reindex().failed == 3
    flaky.broken = False
    assert memory.reindex().indexed == 3
    assert memory.reindex().indexed == 0
    assert memory.recall("t", vector_search_string="note 1").hits[0].message_id == "m1"


class BrokenUpserts(InMemoryVectorStore):
    """A reference store whose upserts fail while `broken` is set (fault injection)."""

    broken = True

    def upsert(self, *args: Any, **kwargs: Any) -> list[str]:
        if self.broken:
            raise TimeoutError("vector store timed out")
        return super().upsert(*args, **kwargs)


def test_vector_failure_keeps_messages_and_reindex_repairs() -> None:
    store = BrokenUpserts()
    memory = Memory(InMemoryStorage(), store, HashEmbedder(64), RECALL)
    memory.create_thread("ada", thread_id="t")
    result = memory.save_messages(
        [
            Message(id="a", thread_id="t", role="user", content="first"),
            Message(id="s", thread_id="t", role="system", content="be brief"),
        ]
    )
    # nothing of a failed batch is recorded: a message without text may still have
    # vectors from an earlier text, which the failed write did not remove
    assert (result.not_indexed, result.indexed) == (["a", "s"], [])
    assert "timed out" in (result.error or "")
    store.broken = False
    assert memory.reindex().indexed == 2
    assert store.describe_index(memory.semantic.index_name()).count == 1  # type: ignore[union-attr]


def test_update_thread_reports_a_failed_recopy_and_reindex_repairs_it() -> None:
    """The ledger never claims a vector that may be missing or stale: it is cleared
    before the thread's vectors change, and the failure is reported."""
    store = BrokenUpserts()
    store.broken = False
    memory = Memory(InMemoryStorage(), store, HashEmbedder(64), RECALL)
    memory.create_thread("ada", thread_id="t", metadata={"topic": "old"})
    memory.save_messages(
        [Message(id=f"m{i}", thread_id="t", role="user", content=f"note {i}") for i in range(3)]
    )
    store.broken = True
    result = memory.update_thread("t", metadata={"topic": "new"})
    assert result.thread.metadata == {"topic": "new"}
    assert (result.indexed, result.not_indexed) == ([], ["m0", "m1", "m2"])
    assert "timed out" in (result.error or "")
    name = memory.semantic.index_name()  # type: ignore[union-attr]
    assert [m.id for m in memory.storage.unindexed(name)] == ["m0", "m1", "m2"]
    store.broken = False
    assert memory.reindex().indexed == 3
    hits = store.query(name, HashEmbedder(64).embed(["note"])[0], 10, partition=EVERYWHERE)
    assert {h.metadata["topic"] for h in hits} == {"new"}


def test_a_shorter_edit_leaves_no_stale_chunk() -> None:
    """New vectors are written before stale ones go; either way round a message ends
    with exactly the chunks its text has now."""
    store = InMemoryVectorStore()
    memory = Memory(InMemoryStorage(), store, HashEmbedder(64), RECALL)
    memory.create_thread("ada", thread_id="t")
    long = " ".join(["word"] * 4500)  # three chunks of the hash embedder's 2,000 words
    name = memory.semantic.index_name()  # type: ignore[union-attr]

    def chunks() -> set[str]:
        return {
            h.id
            for h in store.query(
                name, HashEmbedder(64).embed(["word"])[0], 100, partition=EVERYWHERE
            )
        }

    for content, expected in [
        (long, {"m#0", "m#1", "m#2"}),
        ("short", {"m"}),
        (long, {"m#0", "m#1", "m#2"}),
    ]:
        memory.save_messages([Message(id="m", thread_id="t", role="user", content=content)])
        assert chunks() == expected
    memory.save_messages([Message(id="m", thread_id="t", role="system", content="x")])
    assert chunks() == set()


def test_a_message_id_holding_a_hash_never_shares_a_vector(
    backends: tuple[Storage, VectorStore],
) -> None:
    """Bob's message `x#1` and the second chunk of Ada's long message `x` once had one
    vector id, so Bob's save moved Ada's chunk into his partition. Vector ids escape
    `#` and `%` in message ids now: each message keeps its own vectors."""
    memory = memory_on(backends, embedder=HashEmbedder(64))
    memory.create_thread("ada", thread_id="ada-t")
    memory.create_thread("bob", thread_id="bob-t")
    long = " ".join(["lisbon"] * 4500)  # three chunks of the hash embedder's 2,000 words
    memory.save_messages([Message(id="x", thread_id="ada-t", role="user", content=long)])
    theirs = ["x#1", "x%231", "x%2", "%"]  # the old clash, and the escape's own
    memory.save_messages(
        [Message(id=i, thread_id="bob-t", role="user", content="lisbon") for i in theirs]
    )
    name = memory.semantic.index_name()  # type: ignore[union-attr]
    probe = HashEmbedder(64).embed(["lisbon"])[0]
    stored = backends[1].query(name, probe, 100, partition=EVERYWHERE)
    owners = {h.id: (h.metadata["message_id"], h.metadata["resource_id"]) for h in stored}
    assert len(owners) == 3 + len(theirs)
    assert sorted(m for m, r in owners.values() if r == "ada") == ["x", "x", "x"]
    assert sorted(m for m, r in owners.values() if r == "bob") == sorted(theirs)
    for resource, own in (("ada", {"x"}), ("bob", set(theirs))):
        found = memory.search(resource, "lisbon", top_k=10)
        assert {h.message.id for h in found} == own


def test_doctor_moves_vectors_written_under_the_old_ids() -> None:
    """A store saved before vector ids escaped `#`: its vector sits under the old id,
    which `doctor` finds and `--repair` writes again under the new one."""
    store = InMemoryVectorStore()
    memory = Memory(InMemoryStorage(), store, HashEmbedder(64), RECALL)
    memory.create_thread("ada", thread_id="t")
    memory.save_messages([Message(id="q#1", thread_id="t", role="user", content="tea")])
    name = memory.semantic.index_name()  # type: ignore[union-attr]
    (new,) = store.get(name, ["q%231"])
    store.delete(name, ids=[new.id], partition=EVERYWHERE)
    kept = {k: v for k, v in new.metadata.items() if k not in ("resource_id", "thread_id")}
    store.upsert(name, ["q#1"], [new.vector], [kept], partition=Partition("ada", "t"))
    assert not memory.doctor().ok
    assert memory.doctor(repair=True).ok
    assert [v.id for v in store.get(name, ["q#1", "q%231"])] == ["q%231"]
    assert [h.message.id for h in memory.search("ada", "tea")] == ["q#1"]


class PoisonEmbedder(HashEmbedder):
    """Fails on any batch holding the word "poison" (one message nobody can index)."""

    def embed(self, texts: Sequence[str]) -> Any:
        if any("poison" in t for t in texts):
            raise ValueError("the embedder cannot take this text")
        return super().embed(texts)


def test_reindex_isolates_a_message_that_cannot_be_indexed() -> None:
    memory = Memory(InMemoryStorage(), InMemoryVectorStore(), PoisonEmbedder(64), RECALL)
    memory.create_thread("ada", thread_id="t")
    texts = ["first", "second", "a poison pill", "fourth", "fifth"]
    saved = memory.save_messages(
        [
            Message(
                id=f"m{i}",
                thread_id="t",
                role="user",
                content=text,
                created_at=datetime(2024, 1, 1, 0, i, tzinfo=UTC),
            )
            for i, text in enumerate(texts)
        ]
    )
    assert len(saved.not_indexed) == 5  # one batch, one embedder call: all failed
    result = memory.reindex(batch_size=2)
    assert (result.indexed, result.failed, result.failed_ids) == (4, 1, ["m2"])
    assert "cannot take this text" in (result.error or "")
    assert memory.reindex().failed_ids == ["m2"]  # still reported, never indexed as if fine


@pytest.mark.parametrize("hostile", [{"$ne": "x"}, ["ada"], 1])
def test_a_hostile_resource_id_never_reaches_a_filter(hostile: object) -> None:
    """A dict as resource_id would become `{resource_id: {$ne: x}}`: every resource."""
    memory = Memory("memory://", "memory://", "hash/64", RECALL)
    conversation(memory)
    memory.create_thread("eve", thread_id="eve-thread")
    with pytest.raises(InvalidInputError, match="resource_id"):
        memory.recall("eve-thread", resource_id=hostile, vector_search_string="Lisbon")  # type: ignore[arg-type]
    semantic = memory.semantic
    assert semantic is not None
    with pytest.raises(InvalidInputError, match="resource_id"):
        semantic.search("Lisbon", "eve-thread", hostile)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["lone \ud800", "x" * 100_001])
def test_bad_queries_are_refused(query: str) -> None:
    memory = Memory("memory://", "memory://", "hash/64", RECALL)
    conversation(memory)
    with pytest.raises(InvalidInputError, match="query"):
        memory.recall("trip", vector_search_string=query)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"semantic_recall": {"top_k": "many"}}, "top_k"),
        ({"semantic_recall": {"scope": "world"}}, "scope"),
        ({"last_messages": -1}, "last_messages"),
        ({"semantic_recal": True}, "semantic_recal"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        Memory("memory://", "memory://", "hash/8", options)


def test_a_filter_too_large_for_any_backend_is_refused_at_once() -> None:
    from recallstack.core.errors import UnsupportedFilterError

    memory = Memory("memory://", "memory://", "hash/8", RECALL)
    conversation(memory)
    config = {"semantic_recall": {"filter": {"topic": {"$in": list(range(100_000))}}}}
    with pytest.raises(UnsupportedFilterError, match="more than 10,000 values"):
        memory.recall("trip", vector_search_string="Lisbon", thread_config=config)


def test_update_thread_without_semantic_recall_still_saves_its_metadata() -> None:
    memory = Memory(InMemoryStorage())
    memory.create_thread("ada", thread_id="t", metadata={"topic": "old"})
    result = memory.update_thread("t", title="renamed", metadata={"topic": "new"})
    assert (result.thread.title, result.thread.metadata) == ("renamed", {"topic": "new"})
    assert memory.get_thread("t") == result.thread
    assert (result.indexed, result.not_indexed) == ([], [])


def test_a_save_reads_the_stored_messages_once() -> None:
    """One read of the batch's ids serves the ownership check and tells Memory which
    messages are new (those need no stale-chunk delete)."""
    storage = InMemoryStorage()
    reads: list[list[str]] = []
    original = storage._get_messages

    def counted(ids: list[str]) -> list[Message]:
        reads.append(ids)
        return original(ids)

    storage._get_messages = counted  # type: ignore[method-assign]
    memory = Memory(storage, InMemoryVectorStore(), HashEmbedder(16), RECALL)
    memory.create_thread("ada", thread_id="t")
    memory.save_messages([Message(id="m", thread_id="t", role="user", content="hello")])
    assert reads == [["m"]]


def test_semantic_recall_needs_an_embedder() -> None:
    with pytest.raises(InvalidInputError, match="needs an embedder"):
        Memory(InMemoryStorage(), InMemoryVectorStore(), None, RECALL)


def test_backends_by_url() -> None:
    memory = Memory("memory://", "memory://", "hash/64", RECALL)
    conversation(memory)
    assert memory.recall("trip", vector_search_string="Lisbon hotel").hits


# ---- speed: calls counted on the real reference backend -------------------------------


class CountingStorage(InMemoryStorage):
    """Counts the storage round trips: listings and windows, and every read of a thread
    (through `get_thread` or inside a save)."""

    def __init__(self) -> None:
        super().__init__()
        self.listings = 0
        self.thread_reads = 0

    def list_messages(self, *args: Any, **kwargs: Any) -> Any:
        self.listings += 1
        return super().list_messages(*args, **kwargs)

    def message_windows(self, *args: Any, **kwargs: Any) -> Any:
        self.listings += 1
        return super().message_windows(*args, **kwargs)

    def _get_thread(self, thread_id: str) -> Any:
        self.thread_reads += 1
        return super()._get_thread(thread_id)


class CountingVectors(InMemoryVectorStore):
    def __init__(self) -> None:
        super().__init__()
        self.queries = 0

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return super().query(*args, **kwargs)


SEMANTIC_TOP_4 = {"top_k": 4, "hybrid": False}


@pytest.fixture
def counted() -> Iterator[tuple[Memory, CountingStorage, CountingVectors]]:
    storage, vectors = CountingStorage(), CountingVectors()
    yield (
        Memory(
            storage, vectors, HashEmbedder(64), {"semantic_recall": {"top_k": 4, "hybrid": False}}
        ),
        storage,
        vectors,
    )


def test_one_embedder_call_per_batch_and_a_cache(
    counted: tuple[Memory, CountingStorage, CountingVectors],
) -> None:
    memory, _, _ = counted
    memory.create_thread("ada", thread_id="t")
    batch = [
        Message(id=f"m{i}", thread_id="t", role="user", content=f"text {i}") for i in range(50)
    ]
    semantic = memory.semantic
    assert semantic is not None
    memory.save_messages(batch)
    assert semantic.embedder.calls == 1
    memory.save_messages(batch)  # same texts: all from the cache
    assert semantic.embedder.calls == 1
    small = semantic.embedder.embedder
    small.batch_size = 20
    memory.save_messages([m.model_copy(update={"content": f"new {m.id}"}) for m in batch])
    assert semantic.embedder.calls == 1 + 3  # 50 new texts in batches of 20


def test_a_save_reads_its_thread_once(
    counted: tuple[Memory, CountingStorage, CountingVectors],
) -> None:
    memory, storage, _ = counted
    memory.create_thread("ada", thread_id="t", metadata={"project": "x"})
    storage.thread_reads = 0
    message = Message(id="m", thread_id="t", role="user", content="one message")
    assert memory.save_messages([message]).indexed == ["m"]
    assert storage.thread_reads == 1
    memory.save_messages([message.model_copy(update={"content": "edited"})])
    assert storage.thread_reads == 2
    hits = memory.recall("t", vector_search_string="edited").hits
    assert [h.message_id for h in hits] == ["m"]  # the thread's metadata reached the vector
    assert (
        memory.semantic.vector.query(  # type: ignore[union-attr]
            memory.semantic.index_name(),
            memory.semantic.embedder.embed(["edited"])[0],
            1,  # type: ignore[union-attr]
            partition=EVERYWHERE,
        )[0].metadata["project"]
        == "x"
    )


def test_one_query_per_chunk_and_one_storage_trip(
    counted: tuple[Memory, CountingStorage, CountingVectors],
) -> None:
    memory, storage, vectors = counted
    conversation(memory)
    storage.listings = vectors.queries = 0
    memory.semantic.recall("Lisbon hotel", "trip", "ada")  # type: ignore[union-attr]
    assert (vectors.queries, storage.listings) == (1, 1)
    memory.semantic.embedder.embedder.max_input = 8  # type: ignore[union-attr]
    query = "Lisbon hotel by the river " * 4  # 20 words: chunks of 8 overlapping by 4
    memory.semantic.recall(query, "trip", "ada")  # type: ignore[union-attr]
    assert vectors.queries == 1 + 4
    assert storage.listings == 2


def test_no_query_no_embedder_call(
    counted: tuple[Memory, CountingStorage, CountingVectors],
) -> None:
    memory, _, vectors = counted
    conversation(memory)
    calls = memory.semantic.embedder.calls  # type: ignore[union-attr]
    memory.recall("trip")
    assert memory.semantic.embedder.calls == calls  # type: ignore[union-attr]
    assert vectors.queries == 0


def test_resources(backends: tuple[Storage, VectorStore]) -> None:
    memory = memory_on(backends)
    assert memory.get_resource("ada") is None
    created = memory.update_resource("ada", {"name": "Ada"})
    updated = memory.update_resource("ada", {"name": "Ada L."})
    assert updated.created_at == created.created_at
    resource = memory.get_resource("ada")
    assert resource is not None and resource.metadata == {"name": "Ada L."}


def test_the_default_is_libsql_at_local_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    memory = Memory(embedder=HashEmbedder(16), options={"semantic_recall": True})
    assert isinstance(memory.storage, LibSQLStorage)
    assert memory.semantic is not None and isinstance(memory.semantic.vector, LibSQLVectorStore)
    memory.create_thread("ada", thread_id="t")
    memory.save_messages([Message(id="m", thread_id="t", role="user", content="hello")])
    assert (tmp_path / "local.db").exists()
    assert memory.recall("t", vector_search_string="hello").hits[0].message_id == "m"


def test_with_closes_what_the_memory_opened_and_nothing_else(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'ctx.db'}"
    mine = LibSQLVectorStore(url)
    with Memory(url, mine, "hash/8", RECALL) as memory:
        memory.create_thread("r", thread_id="t")
        opened = memory.storage
    assert opened.db._closed  # type: ignore[attr-defined]
    assert not mine.db._closed  # passed in: still the caller's
    mine.create_index("still-usable", 2)
    mine.close()
    memory.close()  # idempotent


def test_an_unclosed_memory_warns_when_collected(tmp_path: Path) -> None:
    import gc

    url = f"libsql:///{tmp_path / 'leak.db'}"
    with pytest.warns(ResourceWarning, match="was not closed"):
        Memory(url, url, "hash/8", RECALL)
        gc.collect()
    with Memory(url, url, "hash/8", RECALL):  # closed: no warning
        pass


def test_a_memory_that_cannot_be_built_closes_what_it_opened(tmp_path: Path) -> None:
    from recallstack.core.errors import UnknownBackendError

    url = f"libsql:///{tmp_path / 'half.db'}"
    with pytest.raises(UnknownBackendError):
        Memory(url, "nowhere://x", "hash/8", RECALL)
    probe = LibSQLStorage(url)
    assert probe.db._shared.users == 1  # the storage the failed memory opened was closed
    probe.close()


def test_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALLSTACK_STORAGE", "memory://")
    monkeypatch.setenv("RECALLSTACK_VECTOR", "memory://")
    monkeypatch.setenv("RECALLSTACK_EMBEDDER", "hash/16")
    with Memory.from_env(RECALL) as memory:
        conversation(memory)
        assert memory.recall("trip", vector_search_string="Lisbon hotel").hits
        assert memory.semantic is not None and memory.semantic.index_name().endswith("_16")


@pytest.mark.parametrize("backend", ["libsql", "pg", "mongo"])
def test_keyword_search_holds_when_statistics_lag_behind(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The resource's statistics are read apart from the matches: a save between
    can leave the total below a word's document count. The search still ranks
    (found under load: a logarithm of a negative number raised BackendError)."""
    storage, vector = make_backends(backend, request, tmp_path)
    memory = memory_on((storage, vector), {"semantic_recall": {"hybrid": True}})
    conversation(memory)
    if backend in ("libsql", "pg"):
        storage.db.query("UPDATE recallstack_word_stats SET documents = 1")  # type: ignore[attr-defined]
    else:
        stats = storage.messages.database["recallstack_word_stats"]  # type: ignore[attr-defined]
        stats.update_many({}, {"$set": {"documents": 1}})
    found = storage.search_words("Lisbon", resource_id="ada")
    assert {i for i, _ in found} == {"trip-0", "trip-1", "trip-2"}
    assert all(score > 0 for _, score in found)


def test_the_reference_storage_orders_a_thread_once_for_all_its_windows() -> None:
    """A save with contextual vectors asks a window of every saved message: with each
    window ordering its whole thread again, 5,000 messages took a minute."""
    storage = InMemoryStorage()
    orderings: list[str] = []
    original = storage._thread_messages

    def counted(thread_id: str) -> list[Message]:
        orderings.append(thread_id)
        return original(thread_id)

    storage._thread_messages = counted  # type: ignore[method-assign]
    memory = Memory(storage, "memory://", HashEmbedder(16), {"semantic_recall": True})
    memory.create_thread("ada", thread_id="t")
    batch = [
        Message(id=f"m{i:04d}", thread_id="t", role="user", content=f"n {i}") for i in range(300)
    ]
    orderings.clear()
    memory.save_messages(batch)
    calls = len(orderings)
    windows = storage.message_windows([Include(id=m.id, before=1, after=1) for m in batch])
    assert len(orderings) == calls + 1 and len(windows) == 300
    assert calls <= 4  # the save's windows: its followers, contexts read twice
