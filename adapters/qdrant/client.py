"""The qdrant-client driver: Qdrant servers, and the client's local mode.

URLs: `qdrant://host:6333` (options `api_key=`, `https=`),
`qdrant+local:///path/to/folder`, `qdrant+local://:memory:`. One collection
per index (named by the same rule as SQL tables); a `recallstack_catalog`
collection maps logical names to collections, dimensions and metrics.

Under `AsyncMemory` a server is reached through `AsyncQdrantClient`, awaited
(core/runtime/awaiting.py); the local mode is Python work in process, so it stays in a
worker thread, except where a test asks for `asyncio_local` (below).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from recallstack.adapters.qdrant.filters import Dialect
from recallstack.adapters.qdrant.payload import INDEXED_FIELDS, point_id
from recallstack.adapters.table_names import table_name
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.runtime.awaiting import Awaiting, Seam
from recallstack.core.urls import endpoint, redact
from recallstack.core.vectors import IndexConfig, Metric

CATALOG = "recallstack_catalog"


def connect(url: str, asynchronous: bool = False, **options: Any) -> Any:
    """A client for `qdrant://host:port` (plain HTTP), `qdrant+https://host:port`, or
    qdrant-client's local mode; the API key from `?api_key=`, `api_key=` or
    $QDRANT_API_KEY (Qdrant Cloud's). `asynchronous`: an `AsyncQdrantClient`, which
    takes the same arguments."""
    from qdrant_client import AsyncQdrantClient, QdrantClient

    client = AsyncQdrantClient if asynchronous else QdrantClient
    if url == "qdrant+local://:memory:":
        return client(":memory:")
    if url.startswith("qdrant+local:///") and len(url) > len("qdrant+local:///"):
        return client(path=url[len("qdrant+local:///") :])
    if url.startswith(("qdrant://", "qdrant+http://", "qdrant+https://")):
        server = endpoint(url)
        scheme = "https" if server.scheme == "qdrant+https" else "http"
        api_key = options.pop("api_key", None) or server.secret("api_key", "QDRANT_API_KEY")
        return client(
            url=f"{scheme}://{server.host}:{server.port or 6333}{server.path.rstrip('/')}",
            api_key=api_key,
            **options,
        )
    raise InvalidInputError(
        f"{redact(url)!r}: write qdrant://host:port, qdrant+https://host:port, "
        "qdrant+local:///folder or qdrant+local://:memory:"
    )


class ClientDriver:
    """qdrant-client's calls for the store. `asyncio_local` (for the conformance
    suite): the local mode's `:memory:` collections are also reached through
    `AsyncQdrantClient` under `AsyncMemory`, the way a server's are, so that path is
    tested where no server runs."""

    def __init__(self, url: str, *, asyncio_local: bool = False, **options: Any) -> None:
        from qdrant_client import models

        self.m = models
        local = url.startswith("qdrant+local:")
        if asyncio_local and url != "qdrant+local://:memory:":
            raise InvalidInputError("qdrant: asyncio_local is for qdrant+local://:memory: only")
        self.asyncio_driver = not local or asyncio_local
        """Whether `AsyncMemory` awaits `AsyncQdrantClient` (servers) rather than calling
        this driver in a worker thread (the local mode: its work is Python in process)."""
        self.filters_each_point = local
        """The local mode tests a filter against every point, in Python."""
        self._url, self._options = url, options
        # the local mode is a plain Python object, not safe across threads; servers are
        self._serial: Any = threading.RLock() if local else None
        self.seam: Seam[Any] = Seam(
            connect(url, **options),
            self._async_client if self.asyncio_driver else None,
            AwaitingQdrant.close,
        )
        """`QdrantClient`, or on each running loop `AsyncQdrantClient` awaited."""
        self.dialect = Dialect(
            match=lambda key, value: models.FieldCondition(
                key=key, match=models.MatchValue(value=value)
            ),
            match_any=lambda key, values: models.FieldCondition(
                key=key, match=models.MatchAny(any=values)
            ),
            range=lambda key, bounds: models.FieldCondition(key=key, range=models.Range(**bounds)),
            is_null=lambda key: models.IsNullCondition(is_null=models.PayloadField(key=key)),
            is_empty=lambda key: models.IsEmptyCondition(is_empty=models.PayloadField(key=key)),
            filter=lambda must=None, should=None, must_not=None: models.Filter(
                must=must, should=should, must_not=must_not
            ),
        )
        self._shapes: dict[str, tuple[int, Metric]] = {}
        """Shapes by index name; single dict operations need no lock."""
        try:
            catalog = self.client.collection_exists(CATALOG)
        except Exception as exc:
            if local:
                raise
            server = endpoint(url)
            raise BackendError(f"qdrant: {server.host}:{server.port or 6333}: {exc}") from exc
        if not catalog:
            self.client.create_collection(
                CATALOG, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT)
            )
        self._log_ahead()

    def _log_ahead(self) -> None:
        """Put the local mode's SQLite files (one per collection) in write-ahead-log mode.
        The local mode commits every point in a transaction of its own: SQLite's default
        rollback journal syncs the disk several times per commit, WAL once, and with
        `synchronous=FULL` a commit is as durable (`bench/peers.py` saved 206 turns/s
        instead of 144). The mode stays in the file; the connections are qdrant-client's
        (`LocalCollection.storage`), since it takes no SQLite options."""
        if not self.filters_each_point:
            return
        with self._serial:
            for collection in self.seam.blocking._client.collections.values():
                if collection.storage is not None:  # None: `:memory:`
                    connection = collection.storage.storage
                    connection.execute("PRAGMA journal_mode=WAL")
                    connection.execute("PRAGMA synchronous=FULL")

    @property
    def client(self) -> Any:
        """The blocking client, or under `AsyncMemory` the running loop's asyncio one."""
        return _Serialised(self.seam.current(), self._serial)

    async def _async_client(self) -> AwaitingQdrant:
        if not self._url.startswith("qdrant+local:"):
            return AwaitingQdrant(connect(self._url, asynchronous=True, **self._options))
        made = connect(self._url, asynchronous=True)
        made._client.collections = self.seam.blocking._client.collections  # one engine, two APIs
        return AwaitingQdrant(made)

    def indexes(self) -> dict[str, tuple[int, Metric]]:
        found: dict[str, tuple[int, Metric]] = {}
        offset = None
        while True:
            page, offset = self.client.scroll(CATALOG, limit=1000, offset=offset, with_payload=True)
            for record in page:
                p = record.payload or {}
                found[p["name"]] = (p["dimension"], p["metric"])
            if offset is None:
                return found

    def shape(self, name: str) -> tuple[int, Metric] | None:
        """One index's (dimension, metric), remembered: every call would be a round trip."""
        known = self._shapes.get(name)
        if known is None:
            found = self.client.retrieve(CATALOG, [point_id(name)], with_payload=True)
            if not found:
                return None
            p = found[0].payload or {}
            known = self._shapes[name] = (p["dimension"], p["metric"])
        return known

    def _collection(self, name: str) -> str:
        if self.shape(name) is None:
            raise IndexNotFoundError(name)
        return table_name(name)

    def create(self, name: str, dimension: int, config: IndexConfig) -> None:
        m = self.m
        distance = {"cosine": m.Distance.COSINE, "euclidean": m.Distance.EUCLID}.get(
            config.metric, m.Distance.DOT
        )
        collection = table_name(name)
        if not self.client.collection_exists(collection):
            try:
                self.client.create_collection(
                    collection,
                    vectors_config=m.VectorParams(size=dimension, distance=distance),
                    hnsw_config=m.HnswConfigDiff(m=config.m, ef_construct=config.ef_construction),
                )
            except Exception:
                if not self.client.collection_exists(collection):
                    raise
                # made meanwhile by another thread, task or process: theirs stands
            else:
                # the local mode has no payload indexes: it tests every point
                for key in () if self.filters_each_point else INDEXED_FIELDS:
                    self.client.create_payload_index(
                        collection, key, field_schema=m.PayloadSchemaType.KEYWORD
                    )
                self._log_ahead()
        self.client.upsert(
            CATALOG,
            [
                m.PointStruct(
                    id=point_id(name),
                    vector=[1.0],
                    payload={"name": name, "dimension": dimension, "metric": config.metric},
                )
            ],
        )

    def drop(self, name: str) -> None:
        self.client.delete_collection(self._collection(name))
        self._shapes.pop(name, None)
        self.client.delete(CATALOG, points_selector=self.m.PointIdsList(points=[point_id(name)]))

    def close(self) -> None:
        self.seam.close()
        self.seam.blocking.close()

    def upsert(self, name: str, points: Iterable[tuple[str, list[float], dict[str, Any]]]) -> None:
        self.client.upsert(
            self._collection(name),
            [self.m.PointStruct(id=pid, vector=v, payload=payload) for pid, v, payload in points],
        )

    def search(
        self,
        name: str,
        vector: list[float],
        limit: int,
        filter: Any,
        with_vector: bool,
        exact: bool,
    ) -> list[tuple[dict[str, Any], float, list[float] | None]]:
        hits = self.client.query_points(
            self._collection(name),
            query=vector,
            query_filter=filter,
            limit=limit,
            with_payload=True,
            with_vectors=with_vector,
            # the local mode is always exact, and warns when asked to be
            search_params=None if self.filters_each_point else self.m.SearchParams(exact=exact),
        ).points
        return [(h.payload or {}, float(h.score), h.vector if with_vector else None) for h in hits]

    def points(
        self, name: str, ids: list[str] | None, filter: Any
    ) -> list[tuple[str, dict[str, Any]]]:
        collection = self._collection(name)
        if ids is not None:
            found = self.client.retrieve(collection, ids, with_payload=True)
        else:
            found, offset = [], None
            while True:
                page, offset = self.client.scroll(
                    collection, scroll_filter=filter, limit=1000, offset=offset, with_payload=True
                )
                found += page
                if offset is None:
                    break
        return [(str(r.id), r.payload or {}) for r in found]

    def delete(self, name: str, ids: list[str] | None, filter: Any) -> None:
        selector = (
            self.m.PointIdsList(points=list[int | str | UUID](ids))
            if ids is not None
            else self.m.FilterSelector(filter=filter)
        )
        self.client.delete(self._collection(name), points_selector=selector)

    def stored(self, name: str, ids: list[str]) -> list[tuple[dict[str, Any], list[float]]]:
        found = self.client.retrieve(
            self._collection(name), ids, with_payload=True, with_vectors=True
        )
        return [(r.payload or {}, r.vector) for r in found]

    def set_vector(self, name: str, pid: str, vector: list[float]) -> None:
        self.client.update_vectors(
            self._collection(name), [self.m.PointVectors(id=pid, vector=vector)]
        )

    def set_payload(self, name: str, pid: str, payload: dict[str, Any]) -> None:
        self.client.overwrite_payload(self._collection(name), payload, points=[pid])

    def count(self, name: str) -> int:
        counted: int = self.client.count(self._collection(name), exact=True).count
        return counted


class AwaitingQdrant(Awaiting):
    """The seam's asyncio side: `AsyncQdrantClient` with `QdrantClient`'s methods, each
    awaited with `await_only`."""

    async def close(self) -> None:
        """Close the client, on its loop (the seam's keeper does)."""
        await self._target.close()


class _Serialised:
    """The client, with every call made under `lock` (when there is one)."""

    def __init__(self, client: Any, lock: Any) -> None:
        self._client = client
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if self._lock is None or not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        return call
