"""The MongoDB adapter's own rules, beyond the conformance suite: URLs, the documents
it stores, what it refuses, how it picks a search path, and the Atlas pipelines.

These run on mongomock, the stand-in; those that take `any_url` also run on the
server `$RECALLSTACK_MONGODB_URL` names (`nox -s conformance-mongo` runs them on
SecantusDB, a wire-protocol server). The Atlas path is checked through the
documents it sends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import mongomock
import numpy as np
import pymongo.errors
import pytest

from recallstack.adapters.mongo import URL_ENV
from recallstack.adapters.mongo.atlas import (
    FILTER_PATHS,
    MAX_CANDIDATES,
    AtlasSearch,
    first_limit,
    index_definition,
    pipeline,
)
from recallstack.adapters.mongo.connection import Connection, database_name
from recallstack.adapters.mongo.documents import field_name, key_name, selection, vector_binary
from recallstack.adapters.mongo.storage import MongoStorage
from recallstack.adapters.mongo.targets import server, stand_in
from recallstack.adapters.mongo.vector import MongoVectorStore
from recallstack.core.errors import BackendError, InvalidInputError, UnsupportedFeatureError
from recallstack.core.filters import parse_filter
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE, Partition


@pytest.fixture
def url() -> Iterator[str]:
    with stand_in() as fresh:
        yield fresh


@pytest.fixture(params=["stand-in", "a-server"] if os.environ.get(URL_ENV) else ["stand-in"])
def any_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """mongomock, and the server `$RECALLSTACK_MONGODB_URL` names when it is set
    (`nox -s conformance-mongo` runs these on SecantusDB: `-k a-server`)."""
    with stand_in() if request.param == "stand-in" else server() as fresh:
        yield fresh


# ---- URLs and clients -------------------------------------------------------------


def test_the_database_is_the_urls_path() -> None:
    assert database_name("mongodb://db.example:27017/agents?retryWrites=true") == "agents"
    assert database_name("mongodb+srv://user:pw@cluster0.example.net/") == "recallstack"
    assert database_name("mongodb://localhost") == "recallstack"
    with pytest.raises(InvalidInputError, match="not a MongoDB database name"):
        database_name("mongodb://localhost/a.b")


def test_every_scheme_reaches_the_mongo_backend() -> None:
    for url in ("mongodb://h/db", "mongodb+srv://h/db", "mongomock://x"):
        assert registry().find("vector", url).name == "mongo"
        assert registry().find("storage", url).name == "mongo"


def test_an_unreachable_url_is_a_backend_error_without_its_password() -> None:
    with pytest.raises(BackendError) as caught:
        MongoStorage("mongodb://ada:hunter2@127.0.0.1:1/db?serverSelectionTimeoutMS=200")
    assert "hunter2" not in str(caught.value)


class _Client(mongomock.MongoClient):  # type: ignore[misc]
    """A stand-in client that remembers being closed."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_client_passed_in_stays_open_and_holds_the_data() -> None:
    client = _Client()
    store = MongoVectorStore("mongodb://ignored/unused", client=client, database="mine")
    store.create_index("i", 2)
    store.close()
    assert not client.closed
    assert "recallstack_vector_indexes" in client["mine"].list_collection_names()


# ---- the documents stored -----------------------------------------------------------


def test_metadata_keys_are_stored_encoded_and_read_back(any_url: str) -> None:
    store = MongoVectorStore(any_url)
    store.create_index("i", 2)
    metadata = {
        "0": "zero",
        "a b": {"c$d": 1},
        "tags": ["x", "y"],
        "at": 2**40,
    }
    store.upsert("i", ["v"], [[1.0, 0.0]], [metadata], partition=Partition("ada"))
    (raw,) = store.db[store._entry("i")["collection"]].find()  # type: ignore[index]
    assert raw["m"] == {
        "-d0": "zero",
        "a-20b": {"c-24d": 1},
        "tags": ["x", "y"],
        "resource_id": "ada",
        "at": 2**40,
    }
    (hit,) = store.query("i", [1.0, 0.0], 1, partition=Partition("ada"))
    assert hit.metadata == {**metadata, "resource_id": "ada"}
    assert type(hit.metadata["at"]) is int  # not bson.Int64


def test_a_digit_key_is_never_a_list_position(any_url: str) -> None:
    """MQL reads `tags.0` as the first element of `tags`; the filter language does not."""
    store = MongoVectorStore(any_url)
    store.create_index("i", 2)
    store.upsert(
        "i",
        ["list", "object"],
        [[1, 0], [0, 1]],
        [{"t": ["x"]}, {"t": {"0": "x"}}],
        partition=EVERYWHERE,
    )
    assert [
        h.id for h in store.query("i", [1, 0], 5, filter={"t.0": "x"}, partition=EVERYWHERE)
    ] == ["object"]
    assert [field_name(k) for k in ("0", "12", " 5", "a1")] == ["-d0", "-d12", "-d-205", "a1"]
    assert [key_name(field_name(k)) for k in ("0", "12", " 5", "a1")] == ["0", "12", " 5", "a1"]


def test_operator_looking_values_match_literally(any_url: str) -> None:
    store = MongoVectorStore(any_url)
    store.create_index("i", 2)
    store.upsert(
        "i",
        ["a", "b"],
        [[1, 0], [0, 1]],
        [{"s": "$gt"}, {"s": {"q": "$where"}}],
        partition=EVERYWHERE,
    )
    assert [
        h.id for h in store.query("i", [1, 0], 5, filter={"s": "$gt"}, partition=EVERYWHERE)
    ] == ["a"]
    assert [
        h.id
        for h in store.query(
            "i", [1, 0], 5, filter={"s.q": {"$in": ["$where"]}}, partition=EVERYWHERE
        )
    ] == ["b"]
    assert (
        store.query(
            "i", [1, 0], 5, filter={"s": {"$gte": "$gt", "$lt": "$gu"}}, partition=EVERYWHERE
        )[0].id
        == "a"
    )


def test_an_integer_mongodb_cannot_hold_is_refused_before_anything_is_written(any_url: str) -> None:
    store = MongoVectorStore(any_url)
    store.create_index("i", 2)
    with pytest.raises(InvalidInputError, match=r"ok\.n: .* outside the 64-bit integers"):
        store.upsert(
            "i",
            ["fine", "ok"],
            [[1, 0], [0, 1]],
            [{"n": 2**63 - 1}, {"n": 2**63}],
            partition=EVERYWHERE,
        )
    assert store.describe_index("i").count == 0


def test_vectors_are_bson_float32_vectors(url: str) -> None:
    blob = vector_binary(np.array([1.5, -2.0], dtype=np.float32))
    assert blob.subtype == 9 and bytes(blob)[:2] == b"\x27\x00" and len(blob) == 2 + 8


def test_timestamps_keep_their_microseconds(any_url: str) -> None:
    from datetime import UTC, datetime

    from recallstack.core.messages import Message
    from recallstack.core.records import Thread

    storage = MongoStorage(any_url)
    storage.save_thread(Thread(id="t", resource_id="ada"))
    at = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    storage.save_messages(
        [Message(id="m", thread_id="t", role="user", content="hi", created_at=at)]
    )
    assert storage.get_messages(["m"])[0].created_at == at


# ---- schema versions ---------------------------------------------------------------


def test_schema_versions_are_recorded_and_a_newer_one_is_refused(any_url: str) -> None:
    storage = MongoStorage(any_url)
    schema = storage.connection.db["recallstack_schema"]
    assert schema.find_one({"_id": "storage"})["version"] == 1  # type: ignore[index]
    schema.update_one({"_id": "storage"}, {"$set": {"version": 99}})
    with pytest.raises(BackendError, match="schema is version 99"):
        MongoStorage(any_url)


# ---- picking the search path ---------------------------------------------------------


class _Deployment:
    """What `hello` and `$listSearchIndexes` answer on some deployment."""

    def __init__(self, hello: dict[str, Any], search: bool) -> None:
        self.hello, self.search = hello, search
        self.admin = self

    def command(self, name: str) -> dict[str, Any]:
        assert name == "hello"
        return self.hello

    def __getitem__(self, name: str) -> _Deployment:
        return self

    def aggregate(self, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert stages == [{"$listSearchIndexes": {}}]
        if not self.search:
            raise pymongo.errors.OperationFailure("$listSearchIndexes is only on Atlas", 6047401)
        return []


@pytest.mark.parametrize(
    ("hello", "search", "transactions", "path"),
    [
        ({"isWritablePrimary": True}, False, False, "exact"),  # a standalone mongod
        ({"setName": "rs0"}, False, True, "exact"),  # a replica set
        ({"msg": "isdbgrid"}, False, True, "exact"),  # mongos
        ({"setName": "atlas-abc"}, True, True, "atlas"),  # Atlas
    ],
)
def test_probing_picks_transactions_and_the_search_path(
    hello: dict[str, Any], search: bool, transactions: bool, path: str
) -> None:
    connection = Connection("mongodb://h/db", client=_Deployment(hello, search))
    assert connection.transactions is transactions
    assert connection.probe_search() == path


def test_the_stand_in_has_no_atlas_search(url: str) -> None:
    assert MongoVectorStore(url).search == "exact"
    with pytest.raises(UnsupportedFeatureError, match="no Atlas Vector Search"):
        MongoVectorStore(url, search="atlas")
    with pytest.raises(InvalidInputError, match="search must be"):
        MongoVectorStore(url, search="ann")  # type: ignore[arg-type]


# ---- the Atlas documents ---------------------------------------------------------------


def test_the_atlas_index_declares_the_vector_and_the_scope_keys() -> None:
    assert index_definition(384, "dotproduct") == {
        "fields": [
            {"type": "vector", "path": "v", "numDimensions": 384, "similarity": "dotProduct"},
            {"type": "filter", "path": "_id"},
            {"type": "filter", "path": "m.resource_id"},
            {"type": "filter", "path": "m.thread_id"},
            {"type": "filter", "path": "m.message_id"},
            {"type": "filter", "path": "m.role"},
        ]
    }


def test_the_vector_search_pipeline() -> None:
    pre = {"m.resource_id": {"$eq": "ada"}}
    assert pipeline([0.5, 1.0], 10, pre) == [
        {
            "$vectorSearch": {
                "index": "recallstack_vectors",
                "path": "v",
                "queryVector": [0.5, 1.0],
                "numCandidates": 100,
                "limit": 10,
                "filter": pre,
            }
        },
        {"$project": {"v": 1, "m": 1}},
    ]
    assert "filter" not in pipeline([1.0], 3, None)[0]["$vectorSearch"]
    assert pipeline([1.0], 5_000, None)[0]["$vectorSearch"]["numCandidates"] == MAX_CANDIDATES
    assert (first_limit(10, whole=True), first_limit(10, whole=False)) == (10, 40)
    assert first_limit(9_000, whole=False) == MAX_CANDIDATES


def test_atlas_is_given_only_the_conditions_on_declared_fields() -> None:
    node = parse_filter(
        {
            "resource_id": "ada",
            "thread_id": {"$in": ["a", "b"]},
            "n": {"$gt": 1},
            "role": {"$ne": "x"},
        }
    )
    pre, whole = selection(node, FILTER_PATHS)
    assert pre == {
        "$and": [{"m.resource_id": {"$eq": "ada"}}, {"m.thread_id": {"$in": ["a", "b"]}}]
    }
    assert not whole
    assert selection(parse_filter({"resource_id": "ada"}), FILTER_PATHS) == (
        {"m.resource_id": {"$eq": "ada"}},
        True,
    )
    assert selection(parse_filter({"resource_id": "ada"})) == ({"m.resource_id": "ada"}, True)


class _Atlas:
    """Answers `$vectorSearch` with the first `limit` of a fixed ranking, as Atlas would."""

    def __init__(self, ranking: list[dict[str, Any]]) -> None:
        self.ranking, self.limits = ranking, []

    def aggregate(self, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        limit = stages[0]["$vectorSearch"]["limit"]
        self.limits.append(limit)
        return self.ranking[:limit]


def test_atlas_candidates_are_checked_and_more_are_fetched_until_top_k_match() -> None:
    ranking = [{"_id": f"d{n:03d}", "m": {"n": n}} for n in range(500)]
    atlas = _Atlas(ranking)
    node = parse_filter({"n": {"$gte": 100}})
    found = list(AtlasSearch(1).candidates(atlas, np.ones(2, np.float32), 5, node, None))
    assert [d["m"]["n"] for d in found][:5] == [100, 101, 102, 103, 104]
    assert atlas.limits == [20, 80, 320]  # four times top_k, then four times more each round
    everything = _Atlas(ranking[:30])
    found = AtlasSearch(1).candidates(everything, np.ones(2, np.float32), 5, node, None)
    assert len(list(found)) == 0
    assert everything.limits == [20, 80]  # fewer results than asked: Atlas has no more


def test_message_content_and_metadata_are_kept_literally(any_url: str) -> None:
    from recallstack.core.messages import Message
    from recallstack.core.records import Thread

    storage = MongoStorage(any_url)
    storage.save_thread(Thread(id="t", resource_id="ada", metadata={"$set": {"a.b": 1}}))
    odd = {"$where": "sleep(1)", "a.b": {"$gt": ""}, "0": None}
    storage.save_messages(
        [Message(id="m", thread_id="t", role="user", content="$gt", metadata=odd)]
    )
    (message,) = storage.get_messages(["m"])
    assert (message.text, message.metadata) == ("$gt", odd)
    assert storage.get_thread("t").metadata == {"$set": {"a.b": 1}}  # type: ignore[union-attr]


def test_a_batch_without_transactions_inserts_then_replaces_what_existed(any_url: str) -> None:
    """One insert for the batch; only the ids MongoDB refused as existing are replaced.
    (The transaction path needs a replica set: mongomock has no sessions.)"""
    connection = Connection(any_url)
    collection = connection.db["c"]
    collection.insert_many([{"_id": "a", "x": 0}, {"_id": "c", "x": 0}])
    told: list[str] = []
    documents = [{"_id": i, "x": 1} for i in ("a", "b", "c")]
    connection.replace(collection, documents, None, told.extend)
    assert sorted(collection.find(), key=lambda d: d["_id"]) == documents
    assert told == ["a", "c"]


# ---- under AsyncMemory ------------------------------------------------------------------


def test_async_memory_awaits_the_asyncio_client(url: str) -> None:
    """Under AsyncMemory every call goes through the asyncio client (the stand-in's
    `AsyncStandIn`, as `AsyncMongoClient` on a server), never the blocking one."""
    import asyncio

    from recallstack import AsyncMemory, Message

    class Refusing:
        @property
        def db(self) -> Any:
            raise AssertionError("the blocking client was used")

        def transaction(self) -> Any:
            raise AssertionError("the blocking client was used")

    storage, vector = MongoStorage(url), MongoVectorStore(url, search="exact")
    assert storage.asyncio_driver and vector.asyncio_driver
    config = {"semantic_recall": {"top_k": 2, "message_range": 1}}

    async def main() -> list[list[str]]:
        async with AsyncMemory(storage, vector, "hash/256", config) as memory:
            await memory.create_thread("maya", thread_id="t")
            first = Message(thread_id="t", role="user", content="hello")
            await memory.save_messages([first])  # both stores' asyncio clients are made
            blocking = storage.connection.seam.blocking, vector.connection.seam.blocking
            refusing: Any = Refusing()
            storage.connection.seam.blocking = vector.connection.seam.blocking = refusing
            try:
                texts = [f"note {n} about {topic}" for n in range(30) for topic in ("tea", "bikes")]
                await memory.save_messages(
                    [Message(thread_id="t", role="user", content=text) for text in texts]
                )
                hits = await memory.search("maya", "bikes", top_k=3)
                recalled = await memory.recall("t", "maya", "tea", per_page=2)
                await memory.delete_messages([hits[0].message.id])
                page = await memory.recall("t", "maya", per_page=100)  # the history only
            finally:
                storage.connection.seam.blocking, vector.connection.seam.blocking = blocking
            return [
                [h.message.text for h in hits],
                [m.text for m in recalled.messages],
                [m.text for m in page.messages],
            ]

    hits, recalled, listed = asyncio.run(main())
    assert len(hits) == 3 and all("bikes" in text for text in hits)
    assert recalled and len(listed) == 60 and hits[0] not in listed
    with pytest.raises(AssertionError, match="blocking client"):  # the probe is live
        Refusing().transaction()


def test_a_client_passed_in_is_called_in_a_worker_thread() -> None:
    """There is no asyncio twin of a client passed in to open."""
    deployment = _Deployment({"isWritablePrimary": True}, search=False)
    assert not Connection("mongodb://h/db", client=deployment).asyncio_driver
    assert Connection("mongomock://x/db").asyncio_driver


def test_the_stand_in_is_shaped_like_pymongos_asyncio_api() -> None:
    """What is a coroutine in pymongo's asyncio classes is one in the stand-in and is
    awaited by the adapter, and what is not, is not (`find`, a cursor's `sort`)."""
    import inspect

    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.command_cursor import AsyncCommandCursor
    from pymongo.asynchronous.cursor import AsyncCursor
    from pymongo.asynchronous.mongo_client import AsyncMongoClient

    from recallstack.adapters.mongo import stand_in
    from recallstack.adapters.mongo.stand_in import COLLECTION_COROUTINES, AsyncStandIn

    def coroutine(kind: type, name: str) -> bool:
        return inspect.iscoroutinefunction(getattr(kind, name))

    for name in COLLECTION_COROUTINES | {"aggregate", "list_search_indexes"}:
        assert coroutine(AsyncCollection, name), name
    assert coroutine(stand_in._Collection, "aggregate")
    assert not coroutine(AsyncCollection, "find") and not coroutine(stand_in._Collection, "find")
    for name in ("sort", "skip", "limit"):
        assert not coroutine(AsyncCursor, name) and not coroutine(stand_in._Cursor, name)
    for kind in (AsyncCursor, AsyncCommandCursor, stand_in._Cursor):
        assert coroutine(kind, "to_list")
    assert coroutine(AsyncMongoClient, "close") and coroutine(AsyncStandIn, "close")
    # AwaitingClient.transaction (servers only: the stand-in has no transactions)
    assert not coroutine(AsyncMongoClient, "start_session")
    assert coroutine(AsyncClientSession, "start_transaction")
    assert hasattr(AsyncClientSession, "__aenter__")


def test_a_transaction_under_async_memory_is_the_asyncio_sessions() -> None:
    """`AwaitingClient.transaction` on pymongo's real `AsyncMongoClient` (an empty
    transaction needs no server): the asyncio session, in a transaction until the
    block ends, aborted when it raises."""
    import asyncio

    from pymongo import AsyncMongoClient
    from pymongo.asynchronous.client_session import AsyncClientSession

    from recallstack.adapters.mongo.awaiting import AwaitingClient
    from recallstack.core.runtime.awaiting import greenlet_spawn

    def run(client: Any) -> list[Any]:
        seen: list[Any] = []
        with AwaitingClient(client, "db").transaction() as session:
            seen += [type(session), session.in_transaction]
        seen.append(session.in_transaction)
        with (
            pytest.raises(ValueError, match="inside"),
            AwaitingClient(client, "db").transaction() as failed,
        ):
            raise ValueError("inside")
        return [*seen, failed.in_transaction]

    async def main() -> list[Any]:
        client: Any = AsyncMongoClient("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300")
        try:
            return await greenlet_spawn(run, client)
        finally:
            await client.close()

    assert asyncio.run(main()) == [AsyncClientSession, True, False, False]


def test_metadata_read_back_through_real_bson_has_the_types_written() -> None:
    """pymongo decodes a BSON int64 as `bson.Int64` (mongomock never encodes): after
    a real BSON round trip, every value has the type the caller wrote, at any depth."""
    import bson

    from recallstack.adapters.mongo.documents import METADATA, decode_metadata, encode_metadata

    metadata = {
        "at": 1_704_153_600_000,  # epoch milliseconds: beyond 32 bits
        "small": 7,
        "flag": True,
        "ratio": 0.5,
        "nested": {"big": -(2**40), "list": [2**33, 1, "x"]},
        "0": 2**62,
    }
    stored = bson.decode(bson.encode({METADATA: encode_metadata(metadata, "metadata")}))
    assert type(stored[METADATA][field_name("at")]) is not int  # the driver's Int64
    decoded = decode_metadata(stored[METADATA])

    def types(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: types(v) for k, v in value.items()}
        if isinstance(value, list):
            return [types(v) for v in value]
        return (type(value), value)

    assert types(decoded) == types(metadata)


def test_keyword_search_uses_the_wildcard_index_on_words(any_url: str) -> None:
    """The words live under `words.<word>` with a compound wildcard index (`words.$**`),
    which mongomock accepts without building: on a server the index exists and the
    search answers through it."""
    from recallstack.core.messages import Message
    from recallstack.core.records import Thread

    storage = MongoStorage(any_url)
    storage.save_thread(Thread(id="t", resource_id="ada"))
    texts = {"a": "sourdough starter feeding", "b": "starter motor", "c": "piano lessons"}
    storage.save_messages(
        [Message(id=i, thread_id="t", role="user", content=text) for i, text in texts.items()]
    )
    keys = [spec["key"] for spec in storage.messages.index_information().values()]
    assert [("resource_id", 1), ("words.$**", 1)] in keys
    found = storage.search_words("sourdough starter", resource_id="ada")
    assert [i for i, _ in found] == ["a", "b"]
    assert storage.search_words("starter", resource_id="someone else") == []


def test_a_duplicate_id_is_the_servers_duplicate_key_error_then_a_replace(any_url: str) -> None:
    """Saving a message again replaces it: the adapter reads the server's code 11000
    (which mongomock imitates) and replaces only what it refused."""
    from recallstack.core.messages import Message
    from recallstack.core.records import Thread

    storage = MongoStorage(any_url)
    storage.save_thread(Thread(id="t", resource_id="ada"))
    first = Message(id="m", thread_id="t", role="user", content="first")
    storage.save_messages([first])
    with pytest.raises(pymongo.errors.DuplicateKeyError) as raised:
        storage.messages.insert_one({"_id": "m"})
    assert raised.value.code == 11000
    storage.save_messages([first.model_copy(update={"content": "second"})])
    assert [m.text for m in storage.get_messages(["m"])] == ["second"]
