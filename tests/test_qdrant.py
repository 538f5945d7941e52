"""Qdrant specifics: the payload encoding, URLs, ids, the catalog, Edge's optimizer."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallstack.adapters.qdrant.client import connect
from recallstack.adapters.qdrant.edge import folder_of
from recallstack.adapters.qdrant.payload import NAMESPACE, decode, encode, length, point_id
from recallstack.core.errors import (
    BackendError,
    DimensionMismatchError,
    IndexNotFoundError,
    InvalidInputError,
    UnsupportedFilterError,
)
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE, Partition


@pytest.mark.parametrize(
    "metadata",
    [
        {"flag": True, "off": False, "n": 1, "f": 1.5, "s": "x", "none": None},
        {"list": [True, 1, "a", None], "empty": []},
        {"nested": {'k e"y': {"deep": "\x00starts with NUL"}}, "\x00": "\x00T"},
    ],
)
def test_payload_round_trips(metadata: dict[str, Any]) -> None:
    payload = encode("my id", metadata)
    assert decode(payload) == ("my id", metadata)
    assert all(not isinstance(v, bool) for v in payload.values())  # stored as strings


def test_only_empty_lists_are_listed_and_only_other_lengths_kept() -> None:
    payload = encode("i", {"a": {"b c": [], "e": None}, "d": [], "f": [None]})
    assert payload["-p"] == ["a.b-20c", "d"]
    assert encode("i", {"a": 1, "b": {}}, 1.0 + 1e-9) == {"a": 1, "b": {}, "-id": "i"}
    assert encode("i", {}) == {"-id": "i"}


@pytest.mark.parametrize("size", [2.5, 1e-30, 3e300, 1.0 + 1e-5])
def test_vector_lengths_are_kept_exactly_as_ints(size: float) -> None:
    stored = encode("i", {}, size)["-n"]
    assert type(stored) is int and -(2**63) <= stored < 2**63  # a Qdrant integer
    assert length({"-n": stored}) == size
    assert length({}) == 1.0


def test_metadata_keys_never_take_the_reserved_ones() -> None:
    metadata = {"-id": "x", "-p": [], "-n": 2, "id": "y", "p": "z", "n": 3, "m": {}}
    payload = encode("mine", metadata, 4.0)
    assert (payload["-id"], payload["-p"], length(payload)) == ("mine", ["-2dp"], 4.0)
    assert decode(payload) == ("mine", metadata)


@pytest.mark.parametrize(
    "id_", ["message-1", "message-2", "é 😀", "", *(f"m{i}" for i in range(32))]
)
def test_ids_are_uuid5(id_: str) -> None:
    assert point_id(id_) == str(uuid.uuid5(NAMESPACE, id_))


@pytest.mark.parametrize("url", ["qdrant+edge:///", "qdrant+edge://x", "libsql:///x"])
def test_bad_edge_urls(url: str) -> None:
    with pytest.raises(InvalidInputError):
        folder_of(url)


def test_bad_client_urls() -> None:
    with pytest.raises(InvalidInputError, match="qdrant://host:port"):
        connect("qdrant+local://")


def test_edge_folder_reopens(tmp_path: Path) -> None:
    url = f"qdrant+edge:///{tmp_path / 'edge'}"
    store = registry().vector_store(url)
    store.create_index("i", 2)
    store.upsert(
        "i", ["a", "b"], [[1, 0], [0, 1]], [{"k": True}, {"k": False}], partition=EVERYWHERE
    )
    store.close()
    again = registry().vector_store(url)
    assert again.list_indexes() == ["i"]
    (hit,) = again.query("i", [1, 0], 1, filter={"k": True}, partition=EVERYWHERE)
    assert (hit.id, hit.metadata) == ("a", {"k": True})


def test_local_mode_in_memory() -> None:
    store = registry().vector_store("qdrant+local://:memory:")
    store.create_index("i", 2, metric="euclidean")
    store.upsert("i", ["a"], [[3, 4]], partition=EVERYWHERE)
    (hit,) = store.query("i", [0, 0], 1, include_vector=True, partition=EVERYWHERE)
    assert hit.score == pytest.approx(1 / (1 + 5))
    assert hit.vector == pytest.approx([3, 4])


def test_string_ranges_are_refused(tmp_path: Path) -> None:
    store = registry().vector_store(f"qdrant+edge:///{tmp_path}")
    store.create_index("i", 2)
    with pytest.raises(UnsupportedFilterError, match=r"qdrant-edge backend .* \$gt on strings"):
        store.query("i", [1, 0], 1, filter={"name": {"$gt": "m"}}, partition=EVERYWHERE)
    assert store.query("i", [1, 0], 1, filter={"n": {"$gt": 1}}, partition=EVERYWHERE) == []


def test_edge_catalog_changes_made_elsewhere_are_seen(tmp_path: Path) -> None:
    url = f"qdrant+edge:///{tmp_path}"
    first, second = registry().vector_store(url), registry().vector_store(url)
    assert first.list_indexes() == []
    second.create_index("made-elsewhere", 3, metric="euclidean")
    assert first.list_indexes() == ["made-elsewhere"]
    with pytest.raises(DimensionMismatchError):
        first.create_index("made-elsewhere", 4)


def test_local_mode_files_log_ahead_and_sync_every_commit(tmp_path: Path) -> None:
    """The local mode commits each point alone, so its SQLite files are put in WAL mode
    (one disk sync per commit instead of several), with `synchronous=FULL` (as durable):
    the catalog's and every index's, made before or after opening, and across reopening."""
    import sqlite3

    url = f"qdrant+local:///{tmp_path / 'local'}"
    store = registry().vector_store(url)
    store.create_index("i", 2)
    store.upsert("i", ["a"], [[1, 0]], partition=EVERYWHERE)
    store.close()
    store = registry().vector_store(url)
    store.create_index("j", 2)  # made after opening
    store.upsert("j", ["b"], [[0, 1]], partition=EVERYWHERE)
    local = store.driver.seam.blocking._client  # type: ignore[attr-defined]
    connections = [c.storage.storage for c in local.collections.values()]
    assert len(connections) == 3  # the catalog, i and j
    for connection in connections:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    store.close()
    files = sorted((tmp_path / "local").rglob("storage.sqlite"))
    assert len(files) == 3
    for file in files:
        with sqlite3.connect(file) as connection:  # the mode stays in the file
            assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store = registry().vector_store(url)
    assert [h.id for h in store.query("i", [1, 0], 1, partition=EVERYWHERE)] == ["a"]
    assert [h.id for h in store.query("j", [0, 1], 1, partition=EVERYWHERE)] == ["b"]
    store.close()


KILLED_SAVER = """
import sys
from recallstack import Memory, Message
storage, vectors, run = sys.argv[1:]
memory = Memory(storage, vectors, "hash/32", {"semantic_recall": {"top_k": 5}})
for t in range(3):
    if memory.get_thread(f"t{t}") is None:
        memory.create_thread("ada", thread_id=f"t{t}")
for i in range(10**6):
    memory.save_messages(
        [
            Message(id=f"{run}-{i}-{k}", thread_id=f"t{i % 3}", role="user", content=f"save {i}")
            for k in range(20)
        ]
    )
    print(i, flush=True)
"""


def test_local_mode_saves_killed_at_any_instant_are_repaired_by_reindex(tmp_path: Path) -> None:
    """Saves into a LibSQL file and a local-mode folder, killed (SIGKILL) at three
    instants: every save reported done is stored, every message recorded as indexed
    has its vector (the WAL files recovered on reopening), and reindex() indexes the
    rest, one vector each."""
    import random
    import signal
    import subprocess
    import sys

    from recallstack import Memory

    storage = f"libsql:///{tmp_path / 'memory.db'}"
    vectors = f"qdrant+local:///{tmp_path / 'local'}"
    done: dict[str, int] = {}
    for run, saves in (("a", 1), ("b", 3), ("c", 6)):
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_SAVER, storage, vectors, run],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(saves):
            child.stdout.readline()
        time.sleep(random.uniform(0, 0.05))  # somewhere in a later save
        child.send_signal(signal.SIGKILL)
        child.wait()
        done[run] = len(child.stdout.read().split()) + saves  # the saves reported done
    with Memory(storage, vectors, "hash/32") as memory:
        semantic, store = memory.semantic, memory.storage
        assert semantic is not None
        # the saver's default writes contextual vectors too, recorded after the plain ones
        context = semantic.context_index_name()
        assert context is not None
        names = [semantic.index_name(), context]
        ids = [f"{run}-{i}-{k}" for run, n in done.items() for i in range(n + 1) for k in range(20)]
        stored = {m.id for m in store.get_messages(ids)}
        assert stored >= {i for i in ids if int(i.split("-")[1]) < done[i[0]]}
        unindexed = {name: {m.id for m in store.unindexed(name, limit=10_000)} for name in names}
        assert unindexed[names[0]] <= unindexed[names[1]]
        for name in names:
            for message_id in sorted(stored - unindexed[name]):
                hits = semantic.vector.query(
                    name, [1.0] * 32, 1, filter={"message_id": message_id}, partition=EVERYWHERE
                )
                assert hits, f"{message_id} is recorded in {name} but has no vector there"
        assert memory.reindex().indexed == len(unindexed[names[1]])
        for name in names:
            assert store.count_unindexed(name) == 0
            assert semantic.vector.describe_index(name).count == len(stored)


@pytest.mark.parametrize("url", ["qdrant+local://:memory:", "qdrant+edge:///{tmp}"])
def test_a_dropped_index_is_forgotten(url: str, tmp_path: Path) -> None:
    store = registry().vector_store(url.format(tmp=tmp_path))
    store.create_index("i", 2)
    store.upsert("i", ["a"], [[1, 0]], partition=EVERYWHERE)
    store.delete_index("i")
    with pytest.raises(IndexNotFoundError):
        store.query("i", [1, 0], 1, partition=EVERYWHERE)
    store.create_index("i", 3)
    assert store.describe_index("i").dimension == 3


@pytest.mark.parametrize("url", ["qdrant+local://:memory:", "qdrant+edge:///{tmp}"])
def test_metadata_named_like_reserved_keys_is_filtered_as_metadata(
    url: str, tmp_path: Path
) -> None:
    store = registry().vector_store(url.format(tmp=tmp_path))
    store.create_index("i", 2)
    store.upsert(
        "i",
        ["a", "b"],
        [[1, 0], [1, 1]],
        [{"-p": [], "id": "b"}, {"p": 1, "-n": 2}],
        partition=EVERYWHERE,
    )

    def ids(where: dict[str, Any]) -> list[str]:
        return [hit.id for hit in store.query("i", [1, 0], 2, filter=where, partition=EVERYWHERE)]

    assert ids({"-p": {"$exists": True}}) == ["a"]
    assert ids({"p": {"$exists": True}}) == ["b"]
    assert ids({"id": "b"}) == ["a"]
    assert ids({"-n": 2}) == ["b"]
    assert ids({"-id": {"$exists": True}}) == []
    assert [h.metadata for h in store.query("i", [1, 0], 2, partition=EVERYWHERE)] == [
        {"-p": [], "id": "b"},
        {"p": 1, "-n": 2},
    ]


@pytest.mark.parametrize("url", ["qdrant+local://:memory:", "qdrant+edge:///{tmp}"])
def test_cosine_vectors_come_back_at_their_length_through_updates(url: str, tmp_path: Path) -> None:
    store = registry().vector_store(url.format(tmp=tmp_path))
    store.create_index("cos", 2)
    store.create_index("l2", 2, metric="euclidean")
    for name in ("cos", "l2"):
        store.upsert(name, ["a"], [[3, 4]], partition=EVERYWHERE)
        store.update(name, id="a", metadata={"k": 1}, partition=EVERYWHERE)
        assert store.query(name, [1, 0], 1, include_vector=True, partition=EVERYWHERE)[
            0
        ].vector == pytest.approx([3, 4])
        store.update(name, id="a", vector=[0, 2], partition=EVERYWHERE)
        assert store.query(name, [1, 0], 1, include_vector=True, partition=EVERYWHERE)[
            0
        ].vector == pytest.approx([0, 2])
    stored = {name: store.driver.points(name, None, None)[0][1] for name in ("cos", "l2")}
    assert "-n" in stored["cos"] and "-n" not in stored["l2"]  # Qdrant normalises cosine only


def test_edge_builds_its_hnsw_index_on_the_first_search_after_writes(tmp_path: Path) -> None:
    """Edge has no background optimizer: without `optimize()` every search is a full scan."""
    store = registry().vector_store(f"qdrant+edge:///{tmp_path}")
    store.create_index("i", 384)
    vectors = np.random.default_rng(0).normal(size=(8_000, 384))  # past Edge's indexing threshold
    store.upsert("i", [f"v{n}" for n in range(len(vectors))], vectors, partition=EVERYWHERE)
    shard = store.driver._shard("i")
    assert shard.info().indexed_vectors_count == 0
    (hit,) = store.query("i", vectors[5], 1, partition=EVERYWHERE)
    assert hit.id == "v5"
    assert shard.info().indexed_vectors_count == len(vectors)


def _search_threads(shard_folder: Path) -> Any:
    """What Edge persisted for the shard: the setting it searches with."""
    (config,) = shard_folder.glob("*/edge_config.json")
    return json.loads(config.read_text()).get("max_search_threads")


def test_edge_searches_on_one_thread_unless_told_otherwise(tmp_path: Path) -> None:
    store = registry().vector_store(f"qdrant+edge:///{tmp_path}")
    store.create_index("i", 2)
    store.upsert("i", ["a"], [[1, 0]], partition=EVERYWHERE)
    store.close()
    assert _search_threads(tmp_path) == 1
    # a shard made by another setting is reopened with this store's
    for threads, persisted in ((3, 3), (None, 0)):  # 0: Edge's own CPU-sized pool
        again = registry().vector_store(f"qdrant+edge:///{tmp_path}", search_threads=threads)
        assert [hit.id for hit in again.query("i", [1, 0], 1, partition=EVERYWHERE)] == ["a"]
        again.close()
        assert _search_threads(tmp_path) == persisted


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_search_threads(threads: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="search_threads must be a positive int or None"):
        registry().vector_store(f"qdrant+edge:///{tmp_path}", search_threads=threads)


def test_engine_errors_are_backend_errors(tmp_path: Path) -> None:
    """Edge raises a plain `Exception` when another store holds the shard's WAL."""
    holder, other = (registry().vector_store(f"qdrant+edge:///{tmp_path}") for _ in range(2))
    holder.create_index("i", 2)
    with pytest.raises(BackendError, match=r"^qdrant-edge: .*WAL") as err:
        other.query("i", [1, 0], 1, partition=EVERYWHERE)
    assert type(err.value.__cause__) is Exception
    local = f"qdrant+local:///{tmp_path / 'local'}"
    first = registry().vector_store(local)
    with pytest.raises(BackendError, match=r"^qdrant: .*already accessed"):
        registry().vector_store(local)
    first.close()


@pytest.mark.parametrize(
    ("url", "rest", "key"),
    [
        ("qdrant://localhost:6333", "http://localhost:6333", None),
        ("qdrant+https://xyz.cloud.qdrant.io?api_key=k1", "https://xyz.cloud.qdrant.io:6333", "k1"),
        ("qdrant+https://[::1]:7000/", "https://[::1]:7000", "from-env"),
        ("qdrant+http://[::1]", "http://[::1]:6333", "from-env"),
    ],
)
def test_server_urls_are_parsed_whole(
    url: str, rest: str, key: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS, IPv6 hosts, query parameters, and the key from the URL or $QDRANT_API_KEY,
    for the blocking client and the asyncio one alike."""
    from qdrant_client import AsyncQdrantClient, QdrantClient

    if key == "from-env":
        monkeypatch.setenv("QDRANT_API_KEY", "from-env")
    for asynchronous, kind in ((False, QdrantClient), (True, AsyncQdrantClient)):
        client = connect(url, asynchronous=asynchronous)  # built; nothing is sent yet
        assert isinstance(client, kind)
        assert (client._client.rest_uri, client._client._api_key) == (rest, key)


@pytest.mark.parametrize(
    ("url", "says"),
    [("qdrant://host:99999", "the port"), ("qdrant://[::1", "the host"), ("qdrant://", "no host")],
)
def test_malformed_server_urls_say_which_part(url: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        connect(url)


def test_async_memory_awaits_the_asyncio_client() -> None:
    """Under AsyncMemory the client's calls go through `AsyncQdrantClient`, never the
    blocking client (a server's path, here on the local mode's collections, which
    `asyncio_local` shares between the two); the local mode alone is not awaited."""
    import asyncio

    from recallstack import AsyncMemory, Message

    class Refusing:
        """The blocking client, refusing every call; its engine stays reachable."""

        def __init__(self, client: Any) -> None:
            self._client = client._client

        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the blocking client's {name} was used")

    store = registry().vector_store("qdrant+local://:memory:", asyncio_local=True)
    driver = store.driver  # type: ignore[attr-defined]
    assert store.asyncio_driver

    async def main() -> list[str]:
        async with AsyncMemory("memory://", store, "hash/32", {"semantic_recall": True}) as memory:
            blocking, driver.seam.blocking = driver.seam.blocking, Refusing(driver.seam.blocking)
            try:
                await memory.create_thread("maya", thread_id="t")
                texts = ["sourdough starter", "Kyoto temples", "road bikes"]
                await memory.save_messages(
                    [Message(thread_id="t", role="user", content=text) for text in texts]
                )
                hits = await memory.search("maya", "kyoto temples", top_k=1)
            finally:
                driver.seam.blocking = blocking
            return [hit.message.text for hit in hits]

    assert asyncio.run(main()) == ["Kyoto temples"]
    # the same collections, written through the asyncio client, read by the blocking one
    names = store.list_indexes()  # own vectors and contextual ones, the default
    assert len(names) == 2 and all(store.describe_index(n).count == 3 for n in names)
    store.close()
    assert not registry().vector_store("qdrant+local://:memory:").asyncio_driver
    with pytest.raises(InvalidInputError, match="asyncio_local"):
        registry().vector_store("qdrant+local:///tmp/x", asyncio_local=True)
    with pytest.raises(AssertionError, match="query_points"):  # the probe is live
        Refusing(driver.seam.blocking).query_points()


LOCAL_FILTERS: list[tuple[str, dict[str, Any] | None, tuple[int, ...]]] = [
    # (a resource's partition, a filter, the top_k for which the engine filters:
    # reading unfiltered would take more than a quarter of the 2,000 points)
    ("half", None, (300, 1_000)),
    ("fifth", None, (300, 1_000)),
    ("x", None, (300, 1_000)),  # a tenth: top_k 10 reads a second, wider page
    ("fifth", {"n": {"$nin": [3, 4]}, "$or": [{"n": {"$lt": 6}}, {"x": None}]}, (300, 1_000)),
    ("rare", None, (1, 10, 300, 1_000)),  # 5 points
    ("absent", None, (1, 10, 300, 1_000)),
]


@pytest.mark.parametrize(("resource", "filter", "engine_filters"), LOCAL_FILTERS)
@pytest.mark.parametrize("top_k", [1, 10, 300, 1_000])
def test_local_mode_filters_the_nearest_points_itself(
    resource: str,
    filter: dict[str, Any] | None,
    engine_filters: tuple[int, ...],
    top_k: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The local mode tests a filter against every point in Python, so the store reads
    the nearest points unfiltered and filters them itself; the answers are the
    reference's, ties included, and the engine filters only for rare matches."""
    from qdrant_client.local.local_collection import LocalCollection

    from recallstack.adapters.memory.vector import InMemoryVectorStore

    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(2_000, 8)).astype(np.float32)
    vectors[1::7] = vectors[::7][: len(vectors[1::7])]  # ties: one point in 7 is a copy
    kinds = ["half", "fifth", "half", "other", "half", "other", "half", "fifth", "other", "x"]
    owners = ["rare" if i % 400 == 3 else kinds[i % 10] for i in range(len(vectors))]
    reference, local = InMemoryVectorStore(), registry().vector_store("qdrant+local://:memory:")
    for store in (reference, local):
        store.create_index("i", 8)
        for owner in dict.fromkeys(owners):  # each resource's points in its partition
            rows = [i for i, o in enumerate(owners) if o == owner]
            ids, metadata = [f"p{i:04d}" for i in rows], [{"n": i % 9} for i in rows]
            store.upsert("i", ids, vectors[rows], metadata, partition=Partition(owner))
    filtered: list[Any] = []
    mask = LocalCollection._payload_and_non_deleted_mask
    monkeypatch.setattr(
        LocalCollection,
        "_payload_and_non_deleted_mask",
        lambda self, flt, **kw: filtered.append(flt) or mask(self, flt, **kw),
    )
    unfiltered_reads: list[int] = []
    search = local.driver.search  # type: ignore[attr-defined]

    def counted(name: str, query: Any, limit: int, flt: Any, *rest: Any) -> Any:
        if flt is None:
            unfiltered_reads.append(limit)
        return search(name, query, limit, flt, *rest)

    monkeypatch.setattr(local.driver, "search", counted)  # type: ignore[attr-defined]
    for query in vectors[:5]:
        want = reference.query("i", query, top_k, filter=filter, partition=Partition(resource))
        got = local.query("i", query, top_k, filter=filter, partition=Partition(resource))
        assert [h.id for h in got] == [h.id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    assert any(f is not None for f in filtered) == (top_k in engine_filters)
    if resource == "x" and top_k == 10:
        assert len(unfiltered_reads) > 5  # some query widened its read
