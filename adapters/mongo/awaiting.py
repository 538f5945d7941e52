"""The seam's asyncio side (connection.py): pymongo's asyncio API (`AsyncMongoClient`)
with the blocking API's shape, for the adapter's code running under `AsyncMemory`:
each coroutine is awaited with `await_only` (core/runtime/awaiting.py), so storage
and vector store are written once.

Only what the adapter calls is here: collections by name, their methods, and
cursors, which are read in slices (`to_list(n)`) so that a long result is never
held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

from recallstack.core.runtime.awaiting import Awaiting, await_only, entered

SLICE = 1_000
"""Documents read from a cursor per round of the event loop."""


class AwaitingClient:
    """An `AsyncMongoClient` (or the stand-in's): its database, and transactions."""

    def __init__(self, client: Any, database: str) -> None:
        self._client = client
        self.db = AwaitingDatabase(client[database])

    async def close(self) -> None:
        await self._client.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A session in a transaction: the asyncio session, which the collections'
        methods take as `session=`."""
        with (
            entered(self._client.start_session()) as session,
            entered(await_only(session.start_transaction())),
        ):
            yield session


class AwaitingDatabase:
    def __init__(self, database: Any) -> None:
        self._database = database

    def __getitem__(self, name: str) -> AwaitingCollection:
        return AwaitingCollection(self._database[name])


class AwaitingCollection(Awaiting):
    """An `AsyncCollection`: `find` builds a cursor (no I/O), `aggregate` and
    `list_search_indexes` are awaited for theirs, every other method is awaited."""

    def __init__(self, collection: Any) -> None:
        super().__init__(collection)
        self.name: str = collection.name

    @property
    def database(self) -> AwaitingDatabase:
        return AwaitingDatabase(self._target.database)

    def find(self, *args: Any, **kwargs: Any) -> AwaitingCursor:
        return AwaitingCursor(self._target.find(*args, **kwargs))

    def aggregate(self, *args: Any, **kwargs: Any) -> AwaitingCursor:
        return AwaitingCursor(await_only(self._target.aggregate(*args, **kwargs)))

    def list_search_indexes(self, *args: Any, **kwargs: Any) -> AwaitingCursor:
        return AwaitingCursor(await_only(self._target.list_search_indexes(*args, **kwargs)))


class Chained:
    """A cursor's builder methods (`sort`, `skip`, `limit`: no I/O), passed on to the
    cursor it wraps and chained as pymongo's are."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def sort(self, *args: Any, **kwargs: Any) -> Self:
        self._cursor.sort(*args, **kwargs)
        return self

    def skip(self, count: int) -> Self:
        self._cursor.skip(count)
        return self

    def limit(self, count: int) -> Self:
        self._cursor.limit(count)
        return self


class AwaitingCursor(Chained):
    """An `AsyncCursor` or `AsyncCommandCursor`: shaped like the blocking one, read
    `SLICE` documents per await."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while documents := await_only(self._cursor.to_list(SLICE)):
            yield from documents
