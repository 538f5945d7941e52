"""Contextual vectors (`hybrid={"context": n}`): what is embedded, kept current and fused."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from backends import make_backends

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.api.memory import Memory
from recallstack.core.errors import EmbeddingRefusedError, InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.runtime.config import FUSION_DEFAULTS, HybridConfig
from recallstack.core.vectors import EVERYWHERE
from recallstack.embedders.hashing import HashEmbedder

T0 = datetime(2024, 3, 1, tzinfo=UTC)
EMBEDDER = HashEmbedder(1024)
CONTEXT = {"semantic_recall": {"top_k": 10, "hybrid": {"context": 1}}}
PLAIN_INDEX = "memory_messages_hash_1024_1024"
CONTEXT_INDEX = f"{PLAIN_INDEX}_context1"


@pytest.fixture(params=["memory", "libsql", "pg"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "pg":
        return str(request.getfixturevalue("pg_url"))
    return "memory://" if request.param == "memory" else f"libsql:///{tmp_path / 'memory.db'}"


def message(i: int, text: str, thread: str = "t", role: str = "user") -> Message:
    return Message(
        id=f"m{i}",
        thread_id=thread,
        role=role,  # type: ignore[arg-type]
        content=text,
        created_at=T0 + timedelta(minutes=i),
    )


def open_memory(url: str, options: Any = CONTEXT, embedder: Any = EMBEDDER) -> Memory:
    memory = Memory(url, url, embedder, options)
    if memory.get_thread("t") is None:
        memory.create_thread("ada", thread_id="t")
    return memory


def stored(memory: Memory, message_id: str, index: str = CONTEXT_INDEX) -> tuple[Any, Any]:
    """The vector of a message in an index, and its metadata (None, None: none)."""
    assert memory.semantic is not None
    store = memory.semantic.vector
    probe = np.ones(EMBEDDER.dimension, dtype=np.float32)
    found = store.query(
        index,
        probe,
        5,
        filter={"message_id": message_id},
        include_vector=True,
        partition=EVERYWHERE,
    )
    return (found[0].vector, found[0].metadata) if found else (None, None)


def assert_context(memory: Memory, message_id: str, texts: Sequence[str]) -> None:
    """The message's contextual vector embeds these texts, one per line."""
    vector, _ = stored(memory, message_id)
    assert vector is not None, f"{message_id} has no contextual vector"
    expected = EMBEDDER.embed(["\n".join(texts)])[0]
    assert np.allclose(vector, expected, atol=1e-5)


def test_unset_fusion_numbers_follow_context() -> None:
    assert HybridConfig().fusion == FUSION_DEFAULTS[True]  # context 1, the default
    assert HybridConfig(context=0).fusion == FUSION_DEFAULTS[False]
    assert HybridConfig(context=2, rrf_k=30).fusion.rrf_k == 30
    assert HybridConfig(context=2, rrf_k=30).fusion.candidates == FUSION_DEFAULTS[True].candidates


@pytest.mark.parametrize("bad", [-1, 9, "one", 1.5])
def test_a_bad_context_is_refused_with_its_place(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="context"):
        Memory(
            "memory://", "memory://", EMBEDDER, {"semantic_recall": {"hybrid": {"context": bad}}}
        )


def test_each_message_is_embedded_with_the_one_before(url: str) -> None:
    memory = open_memory(url)
    memory.create_thread("ada", thread_id="other")
    memory.save_messages(
        [
            message(0, "where did you move"),
            message(1, "some instructions", role="system"),
            message(2, "to the coast", role="assistant"),
            message(3, "first of another thread", thread="other"),
        ]
    )
    assert_context(memory, "m0", ["where did you move"])  # the first has no context
    assert_context(memory, "m2", ["to the coast"])  # the message before is a system one
    assert_context(memory, "m3", ["first of another thread"])  # threads do not mix
    assert stored(memory, "m1") == (None, None)  # a system message has no vectors
    assert "previous_id" not in stored(memory, "m2")[1]
    assert "previous_id" not in stored(memory, "m0")[1]
    # the message's own vector is unchanged, in its own index
    own, _ = stored(memory, "m2", PLAIN_INDEX)
    assert np.allclose(own, EMBEDDER.embed(["to the coast"])[0], atol=1e-5)


def test_two_messages_of_context(url: str) -> None:
    options = {"semantic_recall": {"hybrid": {"context": 2}}}
    memory = open_memory(url, options)
    memory.save_messages([message(i, f"word{i}") for i in range(4)])
    memory.save_messages([message(i, f"word{i}") for i in (20, 40)])  # one batch, far apart
    memory.save_messages([message(30, "rules", role="system")])  # re-embeds m40
    for i, texts in ((3, "word1\nword2\nword3"), (20, "word2\nword3\nword20")):
        vector, _ = stored(memory, f"m{i}", f"{PLAIN_INDEX}_context2")
        assert np.allclose(vector, EMBEDDER.embed([texts])[0], atol=1e-5)
    # m40's two messages before are m20 and the system m30: m20 alone is its context
    vector, metadata = stored(memory, "m40", f"{PLAIN_INDEX}_context2")
    assert np.allclose(vector, EMBEDDER.embed(["word20\nword40"])[0], atol=1e-5)
    assert metadata["previous_id"] == "m20"


def test_an_edit_an_insert_and_a_delete_re_embed_the_messages_after(url: str) -> None:
    memory = open_memory(url)
    memory.save_messages([message(0, "alpha"), message(2, "gamma"), message(4, "epsilon")])
    memory.update_messages([message(0, "alpha edited")])
    assert_context(memory, "m2", ["alpha edited", "gamma"])
    memory.save_messages([message(1, "beta")])  # inserted between m0 and m2
    assert_context(memory, "m1", ["alpha edited", "beta"])
    assert_context(memory, "m2", ["beta", "gamma"])
    memory.delete_messages(["m2"])
    assert_context(memory, "m4", ["beta", "epsilon"])
    assert stored(memory, "m4")[1]["previous_id"] == "m1"
    moved = message(1, "beta").model_copy(update={"created_at": T0 + timedelta(minutes=9)})
    memory.save_messages([moved])  # m1 moves after m4
    assert_context(memory, "m4", ["alpha edited", "epsilon"])
    assert_context(memory, "m1", ["epsilon", "beta"])
    assert memory.reindex().indexed == 0  # every record was kept current


def test_async_memory_keeps_contexts_current_alike(url: str) -> None:
    async def main() -> None:
        async with AsyncMemory(url, url, EMBEDDER, CONTEXT) as memory:
            await memory.create_thread("ada", thread_id="t")
            await memory.save_messages([message(0, "alpha"), message(2, "gamma")])
            await memory.save_messages([message(1, "beta")])
            await memory.delete_messages(["m0"])
            hits = {h.message.id: h for h in await memory.search("ada", "gamma")}
            assert set(hits) == {"m1", "m2"}
            assert hits["m2"].context_score == pytest.approx(0.5**0.5, abs=1e-5)

    asyncio.run(main())
    with open_memory(url) as memory:  # what the awaited calls wrote
        if url != "memory://":
            assert_context(memory, "m2", ["beta", "gamma"])
            assert_context(memory, "m1", ["beta"])


class FailingAfter(HashEmbedder):
    """Embeds `calls` batches, then fails every call until `healed`."""

    def __init__(self, calls: int) -> None:
        super().__init__(1024)
        self.calls = calls

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls -= 1
        if self.calls < 0:
            raise RuntimeError("the embedder is down")
        return super().embed(texts)


def test_a_failed_edit_leaves_the_messages_after_for_reindex(url: str) -> None:
    embedder = FailingAfter(calls=2)  # the first save: its two indexes
    memory = open_memory(url, embedder=embedder)
    memory.save_messages([message(0, "alpha"), message(1, "beta")])
    result = memory.update_messages([message(0, "alpha edited")])
    assert result.not_indexed == ["m0"]
    embedder.calls = 10**6
    assert memory.reindex().indexed == 2  # m0, and m1 whose context changed
    assert_context(memory, "m1", ["alpha edited", "beta"])


class Refusing(HashEmbedder):
    """Refuses every text that holds "forbidden", as a content filter does."""

    def __init__(self) -> None:
        super().__init__(1024)

    def embed(self, texts: Sequence[str]) -> Any:
        refused = {
            i: "flagged by the content filter" for i, t in enumerate(texts) if "forbidden" in t
        }
        if refused:
            raise EmbeddingRefusedError(refused, super().embed(texts))
        return super().embed(texts)


def test_a_refused_message_leaves_its_followers_own_vectors_counted(url: str) -> None:
    """The message after a refused one cannot have its contextual vector (its context
    holds the refused text), but its own vectors are written and recorded: recall
    finds it by them, and an edit of the refused message completes both."""
    memory = open_memory(url, embedder=Refusing())
    saved = memory.save_messages(
        [message(0, "hello there"), message(1, "forbidden words"), message(2, "a fine reply")]
    )
    assert saved.indexed == ["m0"] and saved.not_indexed == ["m1", "m2"]
    assert saved.error is not None and "content filter" in saved.error
    page = memory.storage.list_messages("t").items
    states = memory.index_states(page)
    assert states[PLAIN_INDEX] == {"m0": "indexed", "m1": "not indexed", "m2": "indexed"}
    assert states[CONTEXT_INDEX] == {"m0": "indexed", "m1": "not indexed", "m2": "not indexed"}
    found = memory.search("ada", "a fine reply", top_k=1)
    assert [h.message.id for h in found] == ["m2"] and found[0].dense_score is not None
    again = memory.reindex()
    assert sorted(again.failed_ids) == ["m1", "m2"]  # still refused, said again
    assert "contextual text" in (again.error or "") or "content filter" in (again.error or "")
    assert memory.doctor().ok
    memory.update_messages([message(1, "allowed words")])
    states = memory.index_states(memory.storage.list_messages("t").items)
    assert set(states[PLAIN_INDEX].values()) == set(states[CONTEXT_INDEX].values()) == {"indexed"}
    assert_context(memory, "m2", ["allowed words", "a fine reply"])


def test_reindex_repairs_a_save_killed_before_indexing(url: str) -> None:
    """A kill right after the rows are written: the edited message is unindexed, and
    its follower's contextual vector is stale though recorded; reindex finds it."""
    memory = open_memory(url)
    memory.save_messages([message(0, "alpha"), message(1, "beta")])
    memory.storage.save_messages([message(0, "alpha edited")])  # the save, not its indexing
    assert memory.reindex().indexed == 1
    assert_context(memory, "m1", ["alpha edited", "beta"])


@pytest.mark.parametrize("before", [False, {"context": 0}], ids=["semantic", "hybrid"])
def test_turning_context_on_needs_only_reindex(tmp_path: Path, before: Any) -> None:
    """Also an upgrade: messages saved under the old default (the semantic signal
    alone), then read under the new one."""
    url = f"libsql:///{tmp_path / 'memory.db'}"
    plain = open_memory(url, {"semantic_recall": {"hybrid": before}})
    plain.save_messages([message(i, f"word{i} shared") for i in range(5)])
    plain.close()
    memory = open_memory(url, {"semantic_recall": True})
    assert len(memory.search("ada", "word3")) > 0  # the missing contextual index is no error
    assert memory.reindex().indexed == 5
    assert_context(memory, "m3", ["word2 shared", "word3 shared"])
    assert CONTEXT_INDEX in memory.semantic.index_names()  # type: ignore[union-attr]
    memory.delete_thread("t")
    assert stored(memory, "m3") == (None, None)


def test_a_refused_save_forgets_nothing_of_another_resource(url: str) -> None:
    memory = open_memory(url)
    memory.save_messages([message(0, "alpha"), message(1, "beta")])
    memory.create_thread("eve", thread_id="eve-thread")
    with pytest.raises(InvalidInputError, match="another resource"):
        memory.save_messages([message(0, "taken", thread="eve-thread")])
    assert memory.reindex().indexed == 0  # ada's m1 is still recorded, untouched


def credit_memory(url: str) -> Memory:
    """No keyword weight. Own vectors rank d (another thread), then y; contextual
    vectors rank x, whose context is y, then y (its context dilutes it)."""
    hybrid = {"context": 1, "weight": 1.0}
    memory = open_memory(url, {"semantic_recall": {"top_k": 10, "hybrid": hybrid}})
    memory.create_thread("ada", thread_id="d-thread")
    memory.save_messages(
        [
            message(0, "alpha beta gamma delta epsilon", thread="d-thread"),
            message(1, "zebra", thread="d-thread", role="assistant"),  # d
            message(2, "one two three four five six seven eight"),
            message(3, "zebra zebra zebra lion"),  # y
            message(4, "ok", role="assistant"),  # x
        ]
    )
    return memory


def test_a_contextual_hit_credits_the_message_before_it(url: str) -> None:
    memory = credit_memory(url)
    hits = {h.message.id: h for h in memory.search("ada", "zebra")}
    assert hits["m1"].dense_score == pytest.approx(1.0, abs=1e-5)
    assert hits["m3"].dense_score == pytest.approx(3 / 10**0.5, abs=1e-5)
    assert hits["m4"].context_score == pytest.approx(3 / 11**0.5, abs=1e-5)
    assert hits["m3"].context_score == pytest.approx(3 / 18**0.5, abs=1e-5)
    f = FUSION_DEFAULTS[True]
    share, credit, k = f.context_share, f.context_credit, f.rrf_k
    own = (1 - share) / (k + 2)  # y: second by its own vector
    contextual = share * (1 - credit) / (k + 2)  # second by its contextual vector
    credited = share * credit / (k + 1)  # and the context of the first, x
    assert hits["m3"].score == pytest.approx(own + contextual + credited)
    assert [h.message.id for h in memory.search("ada", "zebra", top_k=1)] == ["m3"]


def test_threshold_and_filter_hold_for_credited_messages(url: str) -> None:
    memory = credit_memory(url)
    # a floor on the message's own similarity: x, found by its context alone, is out
    assert {h.message.id for h in memory.search("ada", "zebra", threshold=0.5)} == {"m1", "m3"}
    found = memory.search("ada", "zebra", filter={"role": "assistant"})
    assert {h.message.id for h in found} == {"m1", "m4"}  # y, a user message, is not credited


def test_a_thread_of_thousands_with_context(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'big.db'}"
    memory = open_memory(url, {"semantic_recall": {"hybrid": {"context": 1}}})
    saved = memory.save_messages([message(i, f"turn {i} word{i % 97}") for i in range(5000)])
    assert len(saved.indexed) == 5000
    memory.delete_messages([f"m{i}" for i in range(0, 5000, 5)])  # 1,000 at once
    assert_context(memory, "m6", ["turn 4 word4", "turn 6 word6"])
    assert memory.reindex().indexed == 0
    hits = memory.search("ada", "word42", top_k=1000)
    assert {h.message.id for h in hits} >= {f"m{i}" for i in range(42, 5000, 97) if i % 5}


def test_four_writers_appending_to_one_thread_leave_every_context_current(
    tmp_path: Path,
) -> None:
    """Each save reads its predecessors after its write, and its followers too: two
    writers racing leave no stale contextual vector, whoever goes first."""
    url = f"libsql:///{tmp_path / 'shared.db'}"
    open_memory(url).close()
    texts = {i: f"turn {i} word{i}" for i in range(200)}

    def write(worker: int) -> None:
        with open_memory(url) as memory:
            for i in range(worker, 200, 4):
                memory.save_messages([message(i, texts[i])])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(4)))
    with open_memory(url) as memory:
        assert memory.reindex().indexed == 0
        for i in range(1, 200):
            assert_context(memory, f"m{i}", [texts[i - 1], texts[i]])


@pytest.mark.parametrize("backend", ["qdrant-edge", "chroma", "mongo", "pinecone"])
def test_contexts_on_every_vector_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    storage, vector = make_backends(backend, request, tmp_path)
    memory = Memory(storage, vector, EMBEDDER, CONTEXT)
    memory.create_thread("ada", thread_id="t")
    memory.save_messages([message(0, "alpha"), message(2, "gamma"), message(4, "epsilon")])
    memory.save_messages([message(1, "beta")])
    memory.delete_messages(["m2"])
    assert_context(memory, "m4", ["beta", "epsilon"])
    assert stored(memory, "m4")[1]["previous_id"] == "m1"
    hits = {h.message.id: h for h in memory.search("ada", "epsilon")}
    assert hits["m4"].context_score == pytest.approx(0.5**0.5, abs=1e-5)
    assert memory.reindex().indexed == 0


def test_a_context_that_keeps_changing_is_left_for_reindex() -> None:
    """Each time the save reads the message's context, another writer has put a new
    message right before it (straight into storage): after a few rounds the save
    stops, reports it not indexed and records nothing for it; reindex() writes it."""
    from recallstack.adapters.memory.storage import InMemoryStorage

    class Busy(InMemoryStorage):
        inserts = 0

        def _include_windows(self, include: list[Any], resource_id: str | None) -> list[Message]:
            if self.inserts < 10:
                self.inserts += 1  # a message a little closer before m9 each time
                when = T0 + timedelta(minutes=9) - timedelta(seconds=30 / self.inserts)
                noise = Message(id=f"n{self.inserts}", thread_id="t", role="user", content="x")
                self.save_messages([noise.model_copy(update={"created_at": when})])
            return super()._include_windows(include, resource_id)

    storage = Busy()
    memory = Memory(storage, "memory://", EMBEDDER, CONTEXT)
    memory.create_thread("ada", thread_id="t")
    result = memory.save_messages([message(9, "target")])
    assert result.not_indexed == ["m9"] and "reindex" in (result.error or "")
    put, storage.inserts = storage.inserts, 10  # the other writer stops
    assert memory.reindex().indexed == put + 1  # m9, and what was put before it
    assert_context(memory, "m9", ["x", "target"])
    assert stored(memory, "m9")[1]["previous_id"] == f"n{put}"


def test_a_message_moved_since_its_follower_was_embedded_is_not_credited_out_of_scope(
    url: str,
) -> None:
    """A save moving y to another thread was killed after y's vectors were written and
    before x's were: x's contextual vector still names y. A search of x's thread
    credits no message of another thread."""
    memory = credit_memory(url)
    moved = [message(3, "zebra zebra zebra lion", thread="d-thread")]
    memory.storage.save_messages(moved)
    assert memory.semantic is not None
    memory.semantic.index(moved)
    found = memory.search("ada", "zebra", thread_id="t", top_k=10)
    assert "m3" not in {h.message.id for h in found}
    assert all(h.message.thread_id == "t" for h in found)
