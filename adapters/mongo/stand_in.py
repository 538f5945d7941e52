"""pymongo's asyncio API over a mongomock client: the stand-in for `AsyncMongoClient`.

mongomock has no asyncio API, and no MongoDB server runs on the project's
machines, so this is how `mongomock://` stores are awaited under `AsyncMemory`:
the same data as the blocking stand-in, through the same calls the adapter
makes on `AsyncMongoClient` (what is a coroutine there is one here; the tests
check each name against pymongo's classes). Each call does its work at once:
there is no I/O to wait for.
"""

from __future__ import annotations

import itertools
from typing import Any

from recallstack.adapters.mongo.awaiting import Chained

COLLECTION_COROUTINES = frozenset(
    {
        "count_documents",
        "create_index",
        "delete_many",
        "delete_one",
        "distinct",
        "drop",
        "find_one",
        "insert_many",
        "replace_one",
        "update_many",
        "update_one",
    }
)
"""`AsyncCollection`'s coroutine methods that the adapter calls."""


class AsyncStandIn:
    """`AsyncMongoClient`'s shape over a mongomock client (shared with the blocking
    stores of its `mongomock://NAME`, so it is never closed)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getitem__(self, name: str) -> _Database:
        return _Database(self._client[name])

    async def close(self) -> None:
        """Nothing to close: the mongomock client outlives this view of it."""


class _Database:
    def __init__(self, database: Any) -> None:
        self._database = database

    def __getitem__(self, name: str) -> _Collection:
        return _Collection(self._database[name])


class _Collection:
    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.name: str = collection.name

    @property
    def database(self) -> _Database:
        return _Database(self._collection.database)

    def find(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._collection.find(*args, **kwargs))

    async def aggregate(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._collection.aggregate(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        if name not in COLLECTION_COROUTINES:
            raise AttributeError(f"the asyncio stand-in has no collection method {name!r}")
        method = getattr(self._collection, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


class _Cursor(Chained):
    """`AsyncCursor` (and `AsyncCommandCursor`) over a mongomock cursor."""

    async def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        return list(itertools.islice(self._cursor, length))
