"""The Pinecone adapter's own rules, beyond the conformance suite: names, what it
refuses before sending anything, and how the service's errors reach the caller.

Every test talks through the real SDK to the loopback emulator
(`recallstack.adapters.pinecone.emulator`), a stand-in for the service.
"""

from __future__ import annotations

from typing import Any

import pytest

from recallstack.adapters.pinecone.emulator import API_KEY, Emulator
from recallstack.adapters.pinecone.metadata import decode, encode
from recallstack.adapters.pinecone.store import PineconeVectorStore, pinecone_name, record_id
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE

Emulated = tuple[Emulator, str]


def store(pinecone_emulator: Emulated, **options: Any) -> PineconeVectorStore:
    made = registry().vector_store(pinecone_emulator[1], **options)
    assert isinstance(made, PineconeVectorStore)
    return made


def test_logical_names_become_valid_distinct_pinecone_names() -> None:
    names = ["Chat Memory", "chat-memory", "x" * 200, "émoji 😀", "a", "A"]
    mapped = [pinecone_name("rs", n) for n in names]
    assert len(set(mapped)) == len(names)
    for name in mapped:
        assert len(name) <= 45 and name == name.lower()
        assert all(c.isalnum() or c == "-" for c in name) and name[0] != "-" != name[-1]


def test_an_index_lists_under_its_logical_name_only_in_its_store(
    pinecone_emulator: Emulated,
) -> None:
    emulator, url = pinecone_emulator
    mine = store(pinecone_emulator)
    theirs = registry().vector_store(url.replace("pinecone://t", "pinecone://other"))
    mine.create_index("Chat Memory/all-MiniLM 384", 3)
    theirs.create_index("theirs", 3)
    assert mine.list_indexes() == ["Chat Memory/all-MiniLM 384"]
    assert theirs.list_indexes() == ["theirs"]
    assert sorted(emulator.indexes) == sorted(
        [pinecone_name("t", "Chat Memory/all-MiniLM 384"), pinecone_name("other", "theirs")]
    )


def test_metadata_round_trips_through_typed_keys() -> None:
    metadata = {
        "s": "x",
        "i": 3,
        "f": 2.5,
        "b": False,
        "z": None,
        "l": ["a", 1, 1.5, True, None],
        "e": [],
        "o": {"deep": {"k": "v"}, "empty": {}},
        "odd key. $": "v",
    }
    stored = encode(metadata, "id")
    assert all(isinstance(v, str | int | float | bool | list) for v in stored.values())
    assert all(isinstance(x, str) for v in stored.values() if isinstance(v, list) for x in v)
    assert decode(stored) == metadata


def test_over_limit_records_are_refused_before_anything_is_sent(
    pinecone_emulator: Emulated,
) -> None:
    emulator, _ = pinecone_emulator
    vectors = store(pinecone_emulator)
    vectors.create_index("i", 2)
    sent = emulator.requests
    with pytest.raises(InvalidInputError, match="metadata of 'big': over Pinecone's 40,960 bytes"):
        vectors.upsert(
            "i",
            ["fine", "big"],
            [[1, 0], [0, 1]],
            [{"a": 1}, {"a": "x" * 41_000}],
            partition=EVERYWHERE,
        )
    with pytest.raises(InvalidInputError, match=r"l\[0\]: .* beyond the integers"):
        vectors.upsert("i", ["n"], [[1, 0]], [{"l": [2**60]}], partition=EVERYWHERE)
    assert emulator.requests == sent
    assert vectors.describe_index("i").count == 0


def test_long_ids_are_mapped_and_given_back() -> None:
    assert record_id("short") == "short"
    assert record_id("x" * 600).startswith("#") and len(record_id("x" * 600)) == 65
    assert record_id("#looks-mapped") != "#looks-mapped"


def test_long_ids_round_trip(pinecone_emulator: Emulated) -> None:
    vectors = store(pinecone_emulator)
    vectors.create_index("i", 2)
    long_id = "m" * 1_000
    vectors.upsert("i", [long_id, "#x"], [[1, 0], [0, 1]], partition=EVERYWHERE)
    assert [h.id for h in vectors.query("i", [1, 0], 2, partition=EVERYWHERE)] == [long_id, "#x"]
    vectors.delete("i", ids=[long_id], partition=EVERYWHERE)
    assert [h.id for h in vectors.query("i", [1, 0], 2, partition=EVERYWHERE)] == ["#x"]


def test_a_store_needs_an_api_key_and_never_shows_it(
    pinecone_emulator: Emulated, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    _, url = pinecone_emulator
    with pytest.raises(InvalidInputError, match="no API key"):
        registry().vector_store(url.replace(f"&api_key={API_KEY}", ""))
    wrong = registry().vector_store(url.replace(API_KEY, "not-the-key-s3cret"))
    with pytest.raises(BackendError, match="Invalid API Key") as caught:
        wrong.create_index("i", 2)
    assert "s3cret" not in str(caught.value)


def test_a_missing_index_is_index_not_found(pinecone_emulator: Emulated) -> None:
    with pytest.raises(IndexNotFoundError):
        store(pinecone_emulator).query("nope", [1, 0], 1, partition=EVERYWHERE)


def test_throttling_and_server_errors_are_retried(pinecone_emulator: Emulated) -> None:
    emulator, _ = pinecone_emulator
    vectors = store(pinecone_emulator)
    vectors.create_index("i", 2)
    vectors.upsert("i", ["a"], [[1, 0]], partition=EVERYWHERE)
    emulator.fail(429, 2)
    before = emulator.requests
    assert [h.id for h in vectors.query("i", [1, 0], 1, partition=EVERYWHERE)] == ["a"]
    assert emulator.requests - before == 3  # two refused, then the answer
    emulator.fail(503, 1)
    vectors.upsert("i", ["b"], [[0, 1]], partition=EVERYWHERE)
    assert vectors.describe_index("i").count == 2


def test_a_lasting_failure_is_a_backend_error_with_the_services_message(
    pinecone_emulator: Emulated,
) -> None:
    emulator, _ = pinecone_emulator
    vectors = store(pinecone_emulator)
    vectors.create_index("i", 2)
    emulator.fail(500, 10)
    with pytest.raises(BackendError, match="scripted failure"):
        vectors.query("i", [1, 0], 1, partition=EVERYWHERE)


def test_the_emulator_enforces_the_services_limits(pinecone_emulator: Emulated) -> None:
    """What the adapter stays within: the emulator refuses what Pinecone refuses (sent
    over raw HTTP, since the SDK checks some of it before sending)."""
    import httpx

    emulator, _ = pinecone_emulator
    vectors = store(pinecone_emulator)
    vectors.create_index("limits", 2)
    host = emulator.indexes[pinecone_name("t", "limits")].model()["host"]
    refusals = [
        ("/vectors/upsert", {"vectors": [{"id": str(i), "values": [1, 0]} for i in range(1_001)]}),
        ("/vectors/upsert", {"vectors": [{"id": "a", "values": [1, 0], "metadata": {"n": None}}]}),
        ("/vectors/upsert", {"vectors": [{"id": "a", "values": [1, 0], "metadata": {"o": {}}}]}),
        ("/vectors/upsert", {"vectors": [{"id": "a", "values": [1, 0], "metadata": {"l": [1]}}]}),
        ("/vectors/upsert", {"vectors": [{"id": "x" * 513, "values": [1, 0]}]}),
        ("/query", {"vector": [1, 0], "topK": 1_001, "includeMetadata": True}),
        ("/query", {"vector": [1, 0], "topK": 1, "filter": {"s": {"$gt": "a"}}}),
        ("/query", {"vector": [1, 0], "topK": 1, "filter": {"s": {"$not": {"$eq": 1}}}}),
        ("/vectors/delete", {"filter": {"k": "v"}}),
    ]
    for path, body in refusals:
        answer = httpx.post(host + path, json=body, headers={"Api-Key": API_KEY})
        assert answer.status_code == 400, (path, body)
    too_big = {"vectors": [{"id": "a", "values": [1, 0], "metadata": {"t": "x" * 2_100_000}}]}
    answer = httpx.post(host + "/vectors/upsert", json=too_big, headers={"Api-Key": API_KEY})
    assert answer.status_code == 413


def test_wide_vectors_go_in_requests_under_two_megabytes(pinecone_emulator: Emulated) -> None:
    emulator, _ = pinecone_emulator
    vectors = store(pinecone_emulator)
    vectors.create_index("wide", 1_536)
    rows = [[float(i + 1)] + [0.5] * 1_535 for i in range(600)]  # about 4.6 MB of JSON
    before = emulator.requests
    vectors.upsert("wide", [f"w{i}" for i in range(600)], rows, partition=EVERYWHERE)
    assert emulator.requests - before >= 3  # one request would be refused (413)
    assert vectors.describe_index("wide").count == 600


def test_a_filter_matching_more_than_one_query_returns_is_deleted_whole(
    pinecone_emulator: Emulated,
) -> None:
    """Past the 10,000 matches a query returns, the ids are listed and checked instead."""
    vectors = store(pinecone_emulator)
    vectors.create_index("many", 2)
    count = 10_050
    ids = [f"m{i:05d}" for i in range(count)]
    metadata = [{"g": "a" if i % 2 == 0 or i >= 10_000 else "b"} for i in range(count)]
    vectors.upsert(
        "many", ids, [[1.0, i / count] for i in range(count)], metadata, partition=EVERYWHERE
    )
    vectors.update("many", filter={"g": "b"}, metadata={"g": "a"}, partition=EVERYWHERE)
    vectors.delete("many", filter={"g": "a"}, partition=EVERYWHERE)
    assert vectors.describe_index("many").count == 0


def test_an_index_deleted_by_another_store_is_a_backend_error_with_the_services_message(
    pinecone_emulator: Emulated,
) -> None:
    _, url = pinecone_emulator
    mine, theirs = store(pinecone_emulator), store(pinecone_emulator)
    mine.create_index("shared", 2)
    mine.upsert("shared", ["a"], [[1, 0]], partition=EVERYWHERE)
    theirs.delete_index("shared")
    with pytest.raises(BackendError, match=r"pinecone: .*not found"):
        mine.query("shared", [1, 0], 1, partition=EVERYWHERE)
    unreachable = registry().vector_store(url, host="http://127.0.0.1:1")
    with pytest.raises(BackendError, match="pinecone: "):
        unreachable.list_indexes()


def test_async_memory_awaits_the_asyncio_client(pinecone_emulator: Emulated) -> None:
    """Under AsyncMemory every call goes through `AsyncPinecone`, never the blocking
    client, and `aclose()` closes the asyncio client's sessions."""
    import asyncio

    from recallstack import AsyncMemory, Message

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the blocking client was used")

    async def main() -> list[str]:
        async with AsyncMemory(
            "memory://", pinecone_emulator[1], "hash/32", {"semantic_recall": True}
        ) as memory:
            assert memory.semantic is not None
            vectors = memory.semantic.vector
            assert isinstance(vectors, PineconeVectorStore)
            blocking = vectors.seam.blocking[0]
            blocking.index = refuse
            blocking.indexes.describe = refuse
            await memory.create_thread("maya", thread_id="t")
            texts = ["sourdough starter", "Kyoto temples", "road bikes"]
            await memory.save_messages(
                [Message(thread_id="t", role="user", content=text) for text in texts]
            )
            hits = await memory.search("maya", "kyoto temples", top_k=1)
            assert vectors.seam.asyncio is not None
            assert len(vectors.seam.asyncio.held) == 1  # this loop's
        assert vectors.seam.asyncio.held == []  # closed by aclose
        return [hit.message.text for hit in hits]

    assert asyncio.run(main()) == ["Kyoto temples"]
    with pytest.raises(AssertionError, match="blocking client"):  # the probe is live
        refuse()
