"""Chroma specifics: the shadow metadata, URLs, scores, and whole-record writes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallstack.adapters.chroma.metadata import JSON, KINDS, decode, encode
from recallstack.adapters.chroma.store import ChromaVectorStore, connect, score_of
from recallstack.adapters.chroma.targets import server
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE


def test_shadow_keys_and_round_trip() -> None:
    metadata = {
        "n": 1,
        "l": [2, "x", True, None, 3.5],
        "o": {"k": None},
        "e": [],
        "s": "",
        "b": False,
        "f": 1.0,
    }
    stored = encode(metadata)
    assert decode(stored) == metadata
    assert stored["v\x00n"] == 1.0 and isinstance(stored["v\x00n"], float)
    assert (stored["ln\x00l"], stored["ls\x00l"], stored["lb\x00l"]) == ([2.0, 3.5], ["x"], [True])
    assert (stored["mx\x00l"], stored["mn\x00l"], stored["z\x00l"]) == (3.5, 2.0, True)
    assert stored["to\x00o"] is True and stored["z\x00o.k"] is True
    kinds = {k: v for k, v in stored.items() if k[0] == "t"}
    assert kinds == dict.fromkeys(
        ["ti\x00n", "tl\x00l", "to\x00o", "tz\x00o.k", "tl\x00e", "ts\x00s", "tb\x00b", "tn\x00f"],
        True,  # a boolean: Chroma writes one far faster than a string
    )
    assert {k[1] for k in kinds} == set(KINDS)  # every path's kind is one a presence test lists
    assert all(v != [] for v in stored.values())  # Chroma refuses empty lists


@pytest.mark.parametrize(
    ("metadata", "said_by_keys"),
    [
        ({"resource_id": "r1", "n": 2, "f": 2.0, "b": True, "z": None, "k e-y": "x"}, True),
        ({"big": 2**53 + 1}, False),  # a float would round it
        ({"l": [1]}, False),
        ({"o": {"k": 1}}, False),
        ({}, False),  # Chroma refuses an empty metadata
    ],
)
def test_flat_metadata_is_read_back_from_its_keys(
    metadata: dict[str, Any], said_by_keys: bool
) -> None:
    stored = encode(metadata)
    assert (JSON not in stored) is said_by_keys
    decoded = decode(stored)
    assert decoded == metadata
    assert [type(v) for v in decoded.values()] == [type(v) for v in metadata.values()]


def test_records_written_with_their_json_are_read_from_it() -> None:
    stored = {"tn\x00n": True, "v\x00n": 1.0, JSON: '{"n": 1}'}
    assert decode(stored) == {"n": 1} and type(decode(stored)["n"]) is int


def test_scores_from_chroma_distances() -> None:
    assert score_of(0.25, "cosine") == pytest.approx(0.75)
    assert score_of(25.0, "euclidean") == pytest.approx(1 / (1 + 5))  # squared L2
    assert score_of(-4.0, "dotproduct") == pytest.approx(5.0)
    assert math.isfinite(score_of(-1e-9, "euclidean"))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("chroma:///", "write chroma"),
        ("chroma://x", "write chroma"),
        ("chroma+http://x:99999", "the port"),
        ("chroma+http://[::1:8000", "the host"),
        ("chroma+https://", "names no host"),
    ],
)
def test_bad_urls(url: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        connect(url)


def test_an_unreachable_server_is_a_backend_error() -> None:
    with pytest.raises(
        BackendError, match=r"cannot reach chroma\+https://127\.0\.0\.1:1"
    ) as raised:
        connect("chroma+https://127.0.0.1:1?token=t0ken")
    assert "t0ken" not in str(raised.value)


def test_a_server_on_an_ipv6_host(tmp_path: Path) -> None:
    """`chroma+http://[::1]:port`, parsed by urllib, reaches a real `chroma run`."""
    with server(host="::1") as url:
        assert url.startswith("chroma+http://[::1]:")
        store = registry().vector_store(url)
        store.create_index("six", 2)
        store.upsert("six", ["a"], [[1, 0]], partition=EVERYWHERE)
        assert [r.id for r in store.query("six", [1, 0], 1, partition=EVERYWHERE)] == ["a"]


def test_rewriting_a_record_drops_its_old_keys(tmp_path: Path) -> None:
    store = registry().vector_store(f"chroma:///{tmp_path}")
    store.create_index("i", 2)
    store.upsert("i", ["a"], [[1, 0]], [{"old": 1, "k": None}], partition=EVERYWHERE)
    store.upsert(
        "i", ["b", "a"], [[0, 1], [1, 0]], [{"old": 3}, {"new": 2}], partition=EVERYWHERE
    )  # one new, one not
    assert [
        r.id
        for r in store.query(
            "i", [1, 0], 5, filter={"old": {"$exists": True}}, partition=EVERYWHERE
        )
    ] == ["b"]
    assert store.query("i", [1, 0], 5, filter={"k": None}, partition=EVERYWHERE)[0].metadata == {
        "new": 2
    }
    store.update("i", id="a", metadata={"k": True}, partition=EVERYWHERE)
    assert (
        store.query("i", [1, 0], 5, filter={"new": {"$exists": True}}, partition=EVERYWHERE) == []
    )
    assert store.describe_index("i").count == 2


def test_above_exact_below_hnsw_answers_and_ties_sort_by_id(tmp_path: Path) -> None:
    """Past `exact_below` records Chroma's HNSW answers; ties at the cut still go by id."""
    store = ChromaVectorStore(f"chroma:///{tmp_path}", exact_below=20)
    exact = ChromaVectorStore(f"chroma:///{tmp_path}", exact_below=10_000)
    store.create_index("big", 8)
    rng = np.random.default_rng(5)
    data = rng.normal(size=(300, 8)).astype(np.float32)
    data[100:115] = data[0]  # fifteen copies of one vector: ties across the top 10
    meta = [{"half": "a" if i % 2 else "b"} for i in range(300)]
    store.upsert("big", [f"v{i:03d}" for i in range(300)], data, meta, partition=EVERYWHERE)
    hits = store.query("big", data[0], 10, partition=EVERYWHERE)
    assert [h.id for h in hits] == ["v000", *[f"v{i}" for i in range(100, 109)]]
    assert "big" in store._large
    (hit,) = store.query("big", data[7], 1, include_vector=True, partition=EVERYWHERE)
    assert (hit.id, hit.metadata) == ("v007", {"half": "a"})
    assert hit.vector == pytest.approx(data[7].tolist())
    found = 0
    for q in data[200:220]:
        truth = {
            h.id for h in exact.query("big", q, 10, filter={"half": "a"}, partition=EVERYWHERE)
        }
        got = store.query(
            "big", q, 10, filter={"half": "a"}, partition=EVERYWHERE
        )  # 150 match: HNSW with a filter
        assert len(got) == 10 and all(h.metadata == {"half": "a"} for h in got)
        found += len(truth & {h.id for h in got})
    assert found / 200 >= 0.9
    store.delete("big", filter={"half": "a"}, partition=EVERYWHERE)
    assert "big" not in store._large  # a delete may have made it small again


def test_a_server_that_goes_away_is_a_backend_error() -> None:
    with server() as url:
        store = registry().vector_store(url)
        store.create_index("i", 2)
        store.upsert("i", ["a"], [[1, 0]], partition=EVERYWHERE)
        with pytest.raises(IndexNotFoundError):
            store.query("missing", [1, 0], 1, partition=EVERYWHERE)
    with pytest.raises(BackendError, match=r"^chroma: ") as err:
        store.query("i", [1, 0], 1, partition=EVERYWHERE)
    assert err.value.__cause__ is not None
    with pytest.raises(BackendError, match=r"^chroma: "):
        registry().vector_store(url)


def test_a_candidate_deleted_before_its_metadata_is_read_is_left_out(tmp_path: Path) -> None:
    """An exact query reads embeddings, then the winners' metadata: a delete may fall between."""
    store = ChromaVectorStore(f"chroma:///{tmp_path}")
    store.create_index("i", 2)
    store.upsert("i", ["a", "b"], [[1, 0], [0, 1]], [{"k": 1}, {"k": 2}], partition=EVERYWHERE)
    collection = store._collection("i")
    candidates = collection.get(include=["embeddings"])
    store.delete("i", ids=["a"], partition=EVERYWHERE)
    query = np.array([1, 0], dtype=np.float32)
    hits = store._exact(collection, candidates, query, "cosine", 2, False, None)
    assert [(h.id, h.metadata) for h in hits] == [("b", {"k": 2})]


def test_async_memory_awaits_a_servers_asyncio_client(tmp_path: Path) -> None:
    """Under AsyncMemory a server is called through `AsyncHttpClient`, never the
    blocking client; Chroma in process is not (it has no asyncio API)."""
    import asyncio

    from recallstack import AsyncMemory, Message

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the blocking client was used")

    async def main(url: str) -> list[str]:
        async with AsyncMemory("memory://", url, "hash/32", {"semantic_recall": True}) as memory:
            assert memory.semantic is not None
            store = memory.semantic.vector
            assert isinstance(store, ChromaVectorStore) and store.asyncio_driver
            for name in ("list_collections", "get_collection", "get_or_create_collection"):
                setattr(store.seam.blocking[0], name, refuse)
            await memory.create_thread("maya", thread_id="t")
            texts = ["sourdough starter", "Kyoto temples", "road bikes"]
            await memory.save_messages(
                [Message(thread_id="t", role="user", content=text) for text in texts]
            )
            hits = await memory.search("maya", "kyoto temples", top_k=1)
            return [hit.message.text for hit in hits]

    with server() as url:
        assert asyncio.run(main(url)) == ["Kyoto temples"]
    assert not ChromaVectorStore(f"chroma:///{tmp_path}").asyncio_driver
    with pytest.raises(AssertionError, match="blocking client"):  # the probe is live
        refuse()
