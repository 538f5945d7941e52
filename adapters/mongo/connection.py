"""One MongoDB database: the client opened from a URL (or passed in), what the
deployment can do, schema versions, and driver errors as recallstack errors.

`mongodb://` and `mongodb+srv://` URLs reach a server through pymongo, the
database named by the URL's path (`recallstack` when it has none).
`mongomock://NAME` is an in-process stand-in (the `mongomock` package), one per
NAME in a process, for tests (a mongomock client passed in counts as one): it
has no transactions and no Atlas Search.

The stores reach the database through one seam (core/runtime/awaiting.py `Seam`):
`Blocking`, over pymongo's `MongoClient`, and on the event loop (`AsyncMemory`)
`awaiting.AwaitingClient`, the running loop's `AsyncMongoClient` opened from the
URL with the same options, awaited; the stand-in's is `stand_in.AsyncStandIn`
over the same mongomock client. A client passed in has no asyncio twin we could
open, so its stores run in a worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from recallstack.adapters.mongo.awaiting import AwaitingClient
from recallstack.core.errors import BackendError, InvalidInputError, refuse_newer
from recallstack.core.runtime.awaiting import Seam
from recallstack.core.urls import redact, scrub

DEFAULT_DATABASE = "recallstack"
SCHEMA = "recallstack_schema"
Search = Literal["atlas", "exact"]
DUPLICATE_KEY = 11000
CONNECT_TIMEOUT_MS = 5_000
"""How long finding and connecting to a server may take, unless the URL says."""
TIMEOUTS = ("serverSelectionTimeoutMS", "connectTimeoutMS")
Migration = Callable[[Any], None]
"""A schema step: takes the pymongo `Database`."""

_STAND_INS: dict[str, Any] = {}
"""mongomock clients by URL host: stores opened on one `mongomock://NAME` share it."""
_STAND_INS_LOCK = threading.Lock()


def database_name(url: str) -> str:
    """The database a URL names in its path, or `recallstack`."""
    name = unquote(urlsplit(url).path.lstrip("/"))
    if not name:
        return DEFAULT_DATABASE
    if any(c in name for c in '/\\. "$\x00') or len(name) > 63:
        raise InvalidInputError(f"{redact(url)!r}: {name!r} is not a MongoDB database name")
    return name


def _errors() -> tuple[type[Exception], ...]:
    """What the driver raises (mongomock raises pymongo's errors too)."""
    import pymongo.errors

    return (pymongo.errors.PyMongoError,)


class Connection:
    """A client and its database. A client passed in (`client=`) is the caller's:
    `close()` leaves it open."""

    def __init__(self, url: str, *, client: Any = None, database: str | None = None) -> None:
        try:
            urlsplit(url)
        except ValueError as exc:  # an unclosed IPv6 bracket, say
            raise InvalidInputError(f"mongodb: {redact(url)}: malformed ({exc})") from None
        self.url = url
        self.stand_in = urlsplit(url).scheme.lower() == "mongomock" or any(
            kind.__module__.partition(".")[0] == "mongomock" for kind in type(client).__mro__
        )
        self.errors = _errors()
        self.owns_client = client is None
        self.asyncio_driver = self.stand_in or self.owns_client
        """Whether `AsyncMemory` awaits an asyncio client rather than calling the stores
        in a worker thread."""
        if client is None:
            client = self._stand_in() if self.stand_in else self._client()
        self._database = database or database_name(url)
        self.blocking = Blocking(client, self._database)
        self.seam: Seam[Client] = Seam(
            self.blocking,
            self._async_client if self.asyncio_driver else None,
            AwaitingClient.close,
        )
        """The blocking client, or on each running loop its asyncio one."""
        self.transactions = self._probe_transactions()

    @property
    def db(self) -> Any:
        """The database, blocking or awaited."""
        return self.seam.current().db

    def _client(self, asynchronous: bool = False) -> Any:
        import pymongo

        kind = pymongo.AsyncMongoClient if asynchronous else pymongo.MongoClient
        malformed: tuple[type[Exception], ...] = (*self.errors, ValueError, TypeError)
        given = {name.lower() for name, _ in parse_qsl(urlsplit(self.url).query)}
        timeouts: dict[str, Any] = {
            option: CONNECT_TIMEOUT_MS for option in TIMEOUTS if option.lower() not in given
        }
        try:
            return kind(self.url, tz_aware=True, uuidRepresentation="standard", **timeouts)
        except malformed as exc:  # an unparsable URL or option
            raise InvalidInputError(f"mongodb: {scrub(str(exc), self.url)}") from None

    async def _async_client(self) -> AwaitingClient:
        if self.stand_in:
            from recallstack.adapters.mongo.stand_in import AsyncStandIn

            return AwaitingClient(AsyncStandIn(self.blocking.client), self._database)
        return AwaitingClient(self._client(asynchronous=True), self._database)

    def _stand_in(self) -> Any:
        import mongomock

        host = urlsplit(self.url).netloc
        with _STAND_INS_LOCK:
            if host not in _STAND_INS:
                _STAND_INS[host] = mongomock.MongoClient(tz_aware=True)
            return _STAND_INS[host]

    def _probe_transactions(self) -> bool:
        """Multi-document transactions need a replica set or a sharded cluster."""
        if self.stand_in:
            return False
        with self.wrapped():
            hello = self.blocking.client.admin.command("hello")
        return "setName" in hello or hello.get("msg") == "isdbgrid"

    def probe_search(self) -> Search:
        """`atlas` where the deployment answers `$listSearchIndexes` (Atlas, or mongod
        with mongot), `exact` elsewhere."""
        if self.stand_in:
            return "exact"
        try:
            list(self.db[SCHEMA].aggregate([{"$listSearchIndexes": {}}]))
        except self.errors:
            return "exact"
        return "atlas"

    @contextmanager
    def wrapped(self) -> Iterator[None]:
        """Driver errors re-raised as `BackendError`, with the URL's secrets hidden."""
        import pymongo.errors

        try:
            yield
        except pymongo.errors.ServerSelectionTimeoutError as exc:  # named by host:port
            reason = scrub(str(exc), self.url).partition(", Timeout:")[0]
            raise BackendError(f"mongodb: cannot connect: {reason}") from exc
        except self.errors as exc:
            raise BackendError(f"mongodb: {scrub(str(exc), self.url)}") from exc

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A session in a transaction where the deployment has them, else `None`:
        writes made with it then apply one by one (see docs/backends/mongo.md)."""
        with self.wrapped():
            if not self.transactions:
                yield None
                return
            with self.seam.current().transaction() as session:
                yield session

    def replace(
        self,
        collection: Any,
        documents: list[dict[str, Any]],
        session: Any,
        replacing: Callable[[list[str]], None] = lambda ids: None,
    ) -> None:
        """Insert documents, replacing those whose `_id` is stored; `replacing(ids)` is
        told which ids may be replaced, before they are.

        In a transaction: delete the ids, then insert (a failed insert would abort
        it). Without one: insert, then replace the documents MongoDB refused as
        duplicates, one by one: a batch of new ids costs one round trip.
        """
        import pymongo.errors

        if session is not None:
            ids = [d["_id"] for d in documents]
            replacing(ids)
            collection.delete_many({"_id": {"$in": ids}}, session=session)
            collection.insert_many(documents, ordered=True, session=session)
            return
        try:
            collection.insert_many(documents, ordered=False)
        except pymongo.errors.BulkWriteError as exc:
            refused = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in refused):
                raise
            stored = [documents[error["index"]] for error in refused]
            replacing([d["_id"] for d in stored])
            for document in stored:
                collection.replace_one({"_id": document["_id"]}, document, upsert=True)

    def migrate(self, component: str, migrations: Sequence[Migration]) -> None:
        """Run the steps `component` has not had yet and record its version. Steps are
        idempotent (index creation), so two processes opening at once both succeed."""
        with self.wrapped():
            row = self.db[SCHEMA].find_one({"_id": component})
            current = int(row["version"]) if row else 0
            refuse_newer(component, current, len(migrations))
            for version, migration in enumerate(migrations, start=1):
                if version > current:
                    migration(self.db)
            if current < len(migrations):
                self.db[SCHEMA].update_one(
                    {"_id": component}, {"$max": {"version": len(migrations)}}, upsert=True
                )

    def close(self) -> None:
        self.seam.close()
        if self.owns_client and not self.stand_in:
            self.blocking.client.close()


class Client(Protocol):
    """The seam: the database, and transactions on it, blocking or awaited."""

    @property
    def db(self) -> Any:
        """The database: its collections by name."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """A session in a transaction, which the collections' methods take as `session=`."""
        ...


class Blocking:
    """The seam's blocking side: pymongo's `MongoClient` (or mongomock's)."""

    def __init__(self, client: Any, database: str) -> None:
        self.client = client
        self.db = client[database]

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.client.start_session() as session, session.start_transaction():
            yield session
