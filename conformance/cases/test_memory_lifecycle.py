"""Group 12: a message's whole life, through memories configured differently.

One memory writes two threads (with or without contextual vectors and the
keyword side); a second memory, configured otherwise (no embedder, plain
semantic recall, contextual vectors), edits, deletes, moves or saves again
messages, or changes a thread's metadata (which every vector carries). Then
the doctor finds no drift, and once the writer has run `reindex()` its
searches equal those of a memory built afresh from what is stored now: no
vector, contextual vector or word entry still holds a text that is gone.
Each case runs with the backend as vector store and as storage, through
`Memory` and `AsyncMemory`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recallstack.core.api.memory import Memory
from recallstack.core.messages import Message

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)
WORDS = ["kyoto temples", "ramen budget", "sushi counter", "onsen night", "train pass", "maple"]
"""One topic per message of the first thread; the second thread's messages mix them."""
CONFIGS: dict[str, dict[str, Any] | None] = {
    "none": None,  # no embedder: it still reaches the vectors others wrote
    "plain": {"hybrid": False},
    "context": {"hybrid": {"context": 1}},
}
WRITERS = ["plain", "context"]
OPERATIONS = ["edit", "delete", "move", "resave", "metadata"]


def _messages(resource: str) -> list[Message]:
    first = [
        Message(
            id=f"{resource}-a{i}",
            thread_id=f"{resource}-t1",
            role="user" if i % 2 == 0 else "assistant",
            content=f"{topic} note{i}",
            created_at=T0 + timedelta(minutes=2 * i),
        )
        for i, topic in enumerate(WORDS)
    ]
    second = [
        Message(
            id=f"{resource}-b{i}",
            thread_id=f"{resource}-t2",
            role="user",
            content=f"{WORDS[(i + 2) % 6]} and {WORDS[(i + 4) % 6]} second{i}",
            created_at=T0 + timedelta(minutes=2 * i + 1),
        )
        for i in range(4)
    ]
    return [*first, *second]


def _operate(memory: Any, operation: str, resource: str) -> None:
    a2, a3 = f"{resource}-a2", f"{resource}-a3"
    if operation == "edit":
        (old,) = memory.storage.get_messages([a2])
        memory.update_messages([old.model_copy(update={"content": "a glacier hike instead"})])
    elif operation == "delete":
        memory.delete_messages([a2, a3])
    elif operation == "metadata":  # every vector of the thread carries its metadata
        memory.update_thread(f"{resource}-t1", metadata={"topic": "japan"})
    elif operation == "move":
        (old,) = memory.storage.get_messages([a2])
        memory.save_messages([old.model_copy(update={"thread_id": f"{resource}-t2"})])
    else:
        memory.save_messages(memory.storage.get_messages([a2, a3, f"{resource}-b1"]))


def _options(name: str, index: str) -> dict[str, Any]:
    return {"semantic_recall": {"index_name": index, "top_k": 10, **(CONFIGS[name] or {})}}


def _signals(hits: list[Any]) -> dict[str, tuple[Any, ...]]:
    """Each hit's text and its signals' scores (rounded: backends round cosines in the
    last bits, so near-ties, and the fused ranks they make, may come in either order)."""
    return {
        h.message.id: (
            h.message.text,
            *(None if s is None else round(s, 4) for s in (h.dense_score, h.keyword_score)),
            None if h.context_score is None else round(h.context_score, 4),
        )
        for h in hits
    }


def _lifecycle(
    make: Callable[..., Any], storage: Any, vector: Any, index: str, resource: str
) -> None:
    from recallstack.adapters.memory.storage import InMemoryStorage
    from recallstack.adapters.memory.vector import InMemoryVectorStore
    from recallstack.embedders.hashing import HashEmbedder

    keywords = storage.keyword_search
    exact = vector.capabilities.exact  # an approximate one may find fewer: never others
    for writer_name in WRITERS:
        if writer_name == "context" and not keywords:
            continue  # hybrid recall needs the storage's keyword search
        for other_name in [n for n in CONFIGS if n != writer_name]:
            if other_name == "context" and not keywords:
                continue
            for operation in OPERATIONS:
                case = f"{resource}{writer_name[0]}{other_name[0]}{operation[0]}"
                writer = make(storage, vector, HashEmbedder(32), _options(writer_name, index))
                other_embedder = None if CONFIGS[other_name] is None else HashEmbedder(32)
                other_options = {} if other_embedder is None else _options(other_name, index)
                other = make(storage, vector, other_embedder, other_options)
                for thread in ("t1", "t2"):
                    writer.create_thread(case, thread_id=f"{case}-{thread}")
                writer.save_messages(_messages(case))
                _operate(other, operation, case)
                doctor = Memory(storage, vector, HashEmbedder(32), _options(writer_name, index))
                checkup = doctor.doctor()
                assert checkup.ok, (writer_name, other_name, operation, checkup.summary())
                writer.reindex()
                stored = [
                    m for t in ("t1", "t2") for m in storage.list_messages(f"{case}-{t}").items
                ]
                fresh = Memory(
                    InMemoryStorage(),
                    InMemoryVectorStore(),
                    HashEmbedder(32),
                    _options(writer_name, index),
                )
                for thread in ("t1", "t2"):
                    now = storage.get_thread(f"{case}-{thread}")
                    fresh.create_thread(case, thread_id=now.id, metadata=now.metadata)
                fresh.save_messages(stored)
                for query, where_ in [
                    *((q, None) for q in [*WORDS, "glacier hike", "note2 note3"]),
                    ("kyoto temples", {"topic": "japan"}),
                ]:
                    got, want = (
                        _signals(m.search(case, query, filter=where_)) for m in (writer, fresh)
                    )
                    where = (writer_name, other_name, operation, query)
                    if exact:
                        assert got.keys() == want.keys(), where
                    assert got == {i: want[i] for i in got}, where
                assert doctor.doctor().ok
                for thread in ("t1", "t2"):
                    writer.delete_thread(f"{case}-{thread}")
                fresh.close()
                doctor.close()


def test_edits_deletes_and_moves_leave_nothing_stale_over_the_vector_store(
    request: pytest.FixtureRequest, opened_vector_store: Any, vector_target: Any, memory_api: Any
) -> None:
    from recallstack.adapters.memory.storage import InMemoryStorage
    from recallstack.conformance.plugin import paired

    with paired(request, opened_vector_store, vector_target) as pair:
        index = pair.index(32)
        pair.created.append(f"{index}_context1")  # the contextual vectors' index goes too
        _lifecycle(memory_api, InMemoryStorage(), pair.store, index, "lv")


def test_edits_deletes_and_moves_leave_nothing_stale_over_storage(
    opened_storage: Any, ids: Any, memory_api: Any
) -> None:
    from recallstack.adapters.memory.vector import InMemoryVectorStore

    resource = ids("ls")
    _lifecycle(memory_api, opened_storage, InMemoryVectorStore(), f"{resource}idx", resource)
