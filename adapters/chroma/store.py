"""Chroma vector store: in process (persistent or in memory) and client-server.

URLs: `chroma:///path/to/folder` (PersistentClient), `chroma://:memory:`
(EphemeralClient; note that Chroma shares one in-memory system per process),
`chroma+http://host:8000` (HttpClient; under AsyncMemory, AsyncHttpClient,
awaited: core/runtime/awaiting.py). One collection per index, named by the
SQL table rule (valid Chroma names); the logical name, dimension and metric
live in the collection's metadata. When a query (with its filter) matches at
most `exact_below` records, they are fetched and scored exactly in numpy:
Chroma's filtered HNSW can miss matching records. Larger queries go to
Chroma's HNSW search, which is approximate.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np

from recallstack.adapters.chroma import CAPABILITIES
from recallstack.adapters.chroma.filters import compile_filter, within
from recallstack.adapters.chroma.metadata import decode, encode
from recallstack.adapters.table_names import table_name
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore, wraps_driver_errors
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.filters import Node
from recallstack.core.metadata import Metadata
from recallstack.core.runtime.awaiting import Seam, await_only
from recallstack.core.scores import best, past_ties, ranked, score
from recallstack.core.urls import endpoint, redact, scrub
from recallstack.core.vectors import (
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    StoredVector,
    keeping_partition,
    trusted_hit,
)

SPACES: dict[Metric, str] = {"cosine": "cosine", "euclidean": "l2", "dotproduct": "ip"}
Handles = dict[str, tuple[Any, tuple[int, Metric]]]
"""Collections and their (dimension, metric), by index name."""


def connect(url: str) -> Any:
    """A client for a folder, memory, or a server: `chroma+http://host:port` or
    `chroma+https://host:port` (Chroma Cloud), with `?tenant=`/`?database=` and the
    token from `?token=` or $CHROMA_API_KEY."""
    import chromadb

    if url == "chroma://:memory:":
        return chromadb.EphemeralClient()
    if url.startswith("chroma:///") and len(url) > len("chroma:///"):
        return chromadb.PersistentClient(path=url[len("chroma:///") :])
    if is_server(url):
        options = server_options(url)  # a malformed URL is the caller's error
        try:  # the client calls the server at once
            return chromadb.HttpClient(**options)
        except Exception as exc:
            raise BackendError(
                f"chroma: cannot reach {redact(url)}: {scrub(str(exc), url)}"
            ) from exc
    raise InvalidInputError(
        f"{redact(url)!r}: write chroma:///folder, chroma://:memory:, "
        "chroma+http://host:port or chroma+https://host:port"
    )


def is_server(url: str) -> bool:
    return url.startswith(("chroma+http://", "chroma+https://"))


def server_options(url: str) -> dict[str, Any]:
    """`HttpClient`'s (and `AsyncHttpClient`'s) arguments for a server URL."""
    from chromadb.config import DEFAULT_DATABASE, DEFAULT_TENANT

    server = endpoint(url)
    tls = server.scheme == "chroma+https"
    token = server.secret("token", "CHROMA_API_KEY")
    return {
        "host": server.host,
        "port": server.port or (443 if tls else 8000),
        "ssl": tls,
        "headers": {"x-chroma-token": token} if token else None,
        "tenant": server.params.get("tenant", DEFAULT_TENANT),
        "database": server.params.get("database", DEFAULT_DATABASE),
    }


def _replace(collection: Any, ids: list[str], vectors: Any, metadatas: list[Any]) -> None:
    """Write records whole. Chroma's upsert merges new metadata into the old, which
    would leave stale shadow keys behind, so existing records are deleted first:
    found first, since looking an id up costs a tenth of deleting one that is not
    there (1.5 µs against 10 to 20 µs, measured), and most writes are new records."""
    existing = collection.get(ids=ids, include=[])["ids"]
    if existing:
        collection.delete(ids=existing)
    collection.add(ids=ids, embeddings=vectors, metadatas=metadatas)


def score_of(distance: float, metric: Metric) -> float:
    """Chroma's distances: 1 - cosine, squared L2, 1 - inner product."""
    if metric == "euclidean":
        return 1.0 / (1.0 + math.sqrt(max(distance, 0.0)))
    return 1.0 - distance


class ChromaVectorStore(VectorStore):
    backend = "chroma"
    capabilities = CAPABILITIES
    driver_errors = (Exception,)
    """chromadb raises its `ChromaError` family, `ValueError` and httpx's errors."""

    @wraps_driver_errors
    def __init__(self, url: str, *, exact_below: int = 5000) -> None:
        self._url = url
        self.asyncio_driver = is_server(url)
        """A server is awaited through `AsyncHttpClient` under AsyncMemory; Chroma in
        process has no asyncio API, and is called in a worker thread."""
        self.seam: Seam[tuple[Any, Handles]] = Seam(
            (connect(url), {}),
            self._async_client if self.asyncio_driver else None,
            _close_async_client,
        )
        """The client and its collections: blocking, or on each running loop
        `AsyncHttpClient` awaited (`AwaitingClient`)."""
        self.exact_below = exact_below
        self._large: set[str] = set()
        """Indexes seen holding more than `exact_below` records: unfiltered queries go
        straight to HNSW. Our own deletes forget it; growth elsewhere is caught by the
        `limit` of the exact read."""

    @property
    def client(self) -> Any:
        """The client: under AsyncMemory on a server, the running loop's
        `AsyncHttpClient` with its calls awaited (core/runtime/awaiting.py)."""
        return self.seam.current()[0]

    @property
    def _handles(self) -> Handles:
        """Collections and their shapes by index name, cached per client (a
        collection calls through the client that found it)."""
        return self.seam.current()[1]

    async def _async_client(self) -> tuple[AwaitingClient, Handles]:
        import chromadb

        made = await chromadb.AsyncHttpClient(**server_options(self._url))
        return AwaitingClient(made), {}

    def close(self) -> None:
        """Close each loop's asyncio client (the blocking one needs no closing)."""
        self.seam.close()

    def _collections(self) -> dict[str, Any]:
        found = {}
        for collection in self.client.list_collections():
            meta = collection.metadata or {}
            if "recallstack_name" in meta:
                found[meta["recallstack_name"]] = collection
        return found

    def _handle(self, name: str) -> tuple[Any, tuple[int, Metric]] | None:
        """The collection and its shape, cached (each lookup is a round trip)."""
        if name not in self._handles:
            from chromadb.errors import NotFoundError

            try:
                collection = self.client.get_collection(table_name(name))
            except NotFoundError:
                return None
            meta = collection.metadata or {}
            self._handles[name] = (collection, (int(meta["dimension"]), meta["metric"]))
        return self._handles[name]

    def _collection(self, name: str) -> Any:
        handle = self._handle(name)
        if handle is None:
            raise IndexNotFoundError(name)
        return handle[0]

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        handle = self._handle(name)
        return None if handle is None else handle[1]

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        self.client.get_or_create_collection(
            table_name(name),
            metadata={"recallstack_name": name, "dimension": dimension, "metric": config.metric},
            configuration={
                "hnsw": {
                    "space": SPACES[config.metric],
                    "max_neighbors": config.m,
                    "ef_construction": config.ef_construction,
                }
            },
        )

    def _list_indexes(self) -> list[str]:
        return list(self._collections())

    def _delete_index(self, name: str) -> None:
        self.seam.blocking[1].pop(name, None)
        for _, handles in self.seam.asyncio.held if self.seam.asyncio else ():
            handles.pop(name, None)
        self._large.discard(name)
        self.client.delete_collection(table_name(name))

    def _describe_index(self, name: str) -> IndexStats:
        shape = self._shape(name)
        if shape is None:
            raise IndexNotFoundError(name)
        return IndexStats(dimension=shape[0], count=self._collection(name).count(), metric=shape[1])

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        collection = self._collection(name)
        step = max(1, min(5000, self.client.get_max_batch_size()))
        for start in range(0, len(batch.ids), step):
            _replace(
                collection,
                batch.ids[start : start + step],
                batch.vectors[start : start + step],
                [encode(m) for m in batch.metadata[start : start + step]],
            )

    def _records(
        self, name: str, target: list[str] | Node, partition: Partition | None
    ) -> dict[str, Any]:
        collection = self._collection(name)
        include = ["embeddings", "metadatas"]
        if isinstance(target, list):
            return dict(collection.get(ids=target, where=within(None, partition), include=include))
        return dict(
            collection.get(where=within(compile_filter(target), partition), include=include)
        )

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        found = self._records(name, ids, None)
        vectors = np.asarray(found["embeddings"], dtype=np.float32).tolist() if found["ids"] else []
        return [
            StoredVector(id=i, vector=v, metadata=decode(m))
            for i, v, m in zip(found["ids"], vectors, found["metadatas"], strict=True)
        ]

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        found = self._records(name, target, partition)
        if not found["ids"]:
            return
        count = len(found["ids"])
        _replace(
            self._collection(name),
            found["ids"],
            [vector] * count if vector is not None else found["embeddings"],
            found["metadatas"]
            if metadata is None
            else [encode(keeping_partition(metadata, decode(m))) for m in found["metadatas"]],
        )

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        self._large.discard(name)
        collection = self._collection(name)
        if isinstance(target, list):
            collection.delete(ids=target, where=within(None, partition))
        else:
            where = None if target is None else compile_filter(target)
            collection.delete(where=within(where, partition))

    def _query(
        self,
        name: str,
        vector: Matrix,
        top_k: int,
        filter: Node | None,
        partition: Partition | None,
        include_vector: bool,
        min_score: float | None,
    ) -> list[QueryResult]:
        shape = self._shape(name)
        assert shape is not None
        collection = self._collection(name)
        where = within(None if filter is None else compile_filter(filter), partition)
        if where is not None or name not in self._large:
            # one read: up to exact_below + 1 candidates, ready to score
            few = collection.get(where=where, limit=self.exact_below + 1, include=["embeddings"])
            if len(few["ids"]) <= self.exact_below:
                return self._exact(
                    collection, few, vector, shape[1], top_k, include_vector, min_score
                )
            if where is None:
                self._large.add(name)
        include = ["metadatas", "distances", *(["embeddings"] if include_vector else [])]
        metric = shape[1]

        incomplete = False

        def nearest(n: int) -> list[tuple[float, str, Metadata, list[float] | None]]:
            """The n nearest as the (score, id, metadata, vector) rows `ranked` takes."""
            nonlocal incomplete
            answer = collection.query(
                query_embeddings=[vector], n_results=n, where=where, include=include
            )
            ids, distances, metadatas = (
                answer["ids"][0],
                answer["distances"][0],
                answer["metadatas"][0],
            )
            vectors = answer["embeddings"][0] if include_vector else [None] * len(ids)
            # more than exact_below rows match, so fewer than that is HNSW giving up
            # (it does on a vector held thousands of times), not the end of the rows
            incomplete = len(ids) < min(n, self.exact_below + 1)
            return [
                (
                    score_of(float(distance), metric),
                    id_,
                    decode(stored),
                    None if stored_vector is None else stored_vector.tolist(),
                )
                for id_, distance, stored, stored_vector in zip(
                    ids, distances, metadatas, vectors, strict=True
                )
            ]

        hits = past_ties(nearest, top_k, lambda row: row[0], self.exact_below)
        if hits is None or incomplete:
            # ties run past exact_below, or HNSW stopped short: every matching row
            # is scored exactly
            every = collection.get(where=where, include=["embeddings"])
            return self._exact(collection, every, vector, metric, top_k, include_vector, min_score)
        return ranked(hits, top_k, min_score)

    def _exact(
        self,
        collection: Any,
        found: Any,
        vector: Matrix,
        metric: Metric,
        top_k: int,
        include_vector: bool,
        min_score: float | None,
    ) -> list[QueryResult]:
        """Score a small candidate set exactly, rather than trust filtered HNSW.

        Metadata is read for the winners only: Chroma reads it at about 14 µs a
        record, so with 1,000 candidates a second read of ten saves 20 ms.
        """
        if not found["ids"]:
            return []
        matrix = np.asarray(found["embeddings"], dtype=np.float32)
        scores = score(matrix, vector, metric)
        chosen = best(scores, found["ids"], top_k, min_score)
        if not chosen:
            return []
        ids = [found["ids"][i] for i in chosen]
        stored = collection.get(ids=ids, include=["metadatas"])
        metadata = dict(zip(stored["ids"], stored["metadatas"], strict=True))
        return [
            trusted_hit(
                id_,
                float(scores[i]),
                decode(metadata[id_]),
                matrix[i].tolist() if include_vector else None,
            )
            for i, id_ in zip(chosen, ids, strict=True)
            if id_ in metadata  # deleted between the two reads: gone
        ]


async def _close_async_client(held: tuple[AwaitingClient, Handles]) -> None:
    """Close the HTTP client chromadb made for this loop: it keeps one per loop in a
    class-wide table keyed by the loop's hash, which a later loop could reuse."""
    from chromadb.api.async_fastapi import AsyncFastAPI

    http = AsyncFastAPI._clients.pop(hash(asyncio.get_running_loop()), None)
    if http is not None:
        await http.aclose()


class AwaitingClient:
    """chromadb's `AsyncClientAPI` with the blocking client's methods this store uses,
    each awaited with `await_only`."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def list_collections(self) -> list[AwaitingCollection]:
        return [AwaitingCollection(c) for c in await_only(self._client.list_collections())]

    def get_collection(self, name: str) -> AwaitingCollection:
        return AwaitingCollection(await_only(self._client.get_collection(name)))

    def get_or_create_collection(self, name: str, **options: Any) -> AwaitingCollection:
        made = await_only(self._client.get_or_create_collection(name, **options))
        return AwaitingCollection(made)

    def delete_collection(self, name: str) -> None:
        await_only(self._client.delete_collection(name))

    def get_max_batch_size(self) -> int:
        size: int = await_only(self._client.get_max_batch_size())
        return size


class AwaitingCollection:
    """chromadb's `AsyncCollection` with the blocking `Collection`'s methods this store
    uses, each awaited with `await_only`."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.metadata = collection.metadata

    def count(self) -> int:
        found: int = await_only(self._collection.count())
        return found

    def get(self, **query: Any) -> Any:
        return await_only(self._collection.get(**query))

    def query(self, **query: Any) -> Any:
        return await_only(self._collection.query(**query))

    def add(self, **records: Any) -> None:
        await_only(self._collection.add(**records))

    def delete(self, **target: Any) -> None:
        await_only(self._collection.delete(**target))
