"""Reading a memory's vectors back by id (`core/api/vector_reads.py`), as doctor and migrate do:
every chunk of a long message, read over several windows, and nothing of another."""

from __future__ import annotations

import pytest

from recallstack.adapters.libsql.storage import LibSQLStorage
from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.api.memory import Memory
from recallstack.core.api.vector_reads import WIDEST, held_messages, message_vectors
from recallstack.core.messages import Message
from recallstack.embedders.hashing import HashEmbedder


def small_chunks() -> HashEmbedder:
    model = HashEmbedder(dimension=16)
    model.max_input = 8  # words per chunk
    return model


@pytest.fixture(params=["memory", "libsql"])
def memory(request: pytest.FixtureRequest, tmp_path: object) -> Memory:
    if request.param == "memory":
        stores = (InMemoryStorage(), InMemoryVectorStore())
    else:
        url = f"libsql:///{tmp_path}/v.db"
        stores = (LibSQLStorage(url), LibSQLVectorStore(url))  # type: ignore[assignment]
    mem = Memory(*stores, small_chunks(), {"semantic_recall": True})
    request.addfinalizer(mem.close)
    for store in stores:
        request.addfinalizer(store.close)
    return mem


def test_every_chunk_of_a_long_message_and_nothing_of_another(memory: Memory) -> None:
    memory.create_thread("ada", thread_id="t")
    long_text = " ".join(f"word{i}" for i in range(8 * (3 * WIDEST + 7)))
    messages = [
        Message(id="a", thread_id="t", role="user", content=long_text),
        Message(id="b", thread_id="t", role="user", content="short"),
        Message(id="s", thread_id="t", role="system", content="no vectors"),
    ]
    memory.save_messages(messages)
    assert memory.semantic is not None and memory.vector is not None
    name = memory.semantic.index_name()
    count = len(memory.semantic.chunks_of(messages[0]))
    assert count > 2 * WIDEST + 1  # read over several windows
    got = message_vectors(memory.vector, name, ["a", "b", "s", "gone"])
    by_message: dict[str, list[str]] = {}
    for v in got:
        by_message.setdefault(str(v.metadata["message_id"]), []).append(v.id)
    assert sorted(by_message) == ["a", "b"]
    assert sorted(by_message["a"]) == sorted(f"a#{k}" for k in range(count))
    assert by_message["b"] == ["b"]
    assert len(message_vectors(memory.vector, name, ["a"])) == count
    assert held_messages(memory.vector, name, ["a", "b", "s", "gone"]) == {"a", "b"}


def test_a_shortened_message_reads_its_new_chunks_only(memory: Memory) -> None:
    memory.create_thread("ada", thread_id="t")
    text = " ".join(f"w{i}" for i in range(8 * 10))
    memory.save_messages([Message(id="m", thread_id="t", role="user", content=text)])
    memory.update_messages([Message(id="m", thread_id="t", role="user", content="w0 w1 w2")])
    assert memory.semantic is not None and memory.vector is not None
    got = message_vectors(memory.vector, memory.semantic.index_name(), ["m"])
    assert [v.id for v in got] == ["m"]
