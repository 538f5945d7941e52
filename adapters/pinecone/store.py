"""Pinecone vector store: one serverless index per logical index, through the SDK.

Logical names map to valid Pinecone names (`<prefix>-<slug>-<hash>`, at most
45 characters); each index keeps its logical name in a record of a namespace
of its own, so `list_indexes` names only this store's indexes. Records are
written in requests within Pinecone's limits (1,000 vectors, 2 MB); delete and
update by filter list the matching ids with filtered queries (serverless
indexes have no delete by filter), then act on the ids. Queries ask for one
more hit than top_k, and more while it ties with the last, so ties at the cut
are ordered by id; scores follow docs/spec/backends.md §3 (Pinecone's
euclidean score is the squared distance). Under AsyncMemory the same code runs
over the SDK's `AsyncPinecone`, each call awaited (core/runtime/awaiting.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from recallstack.adapters.pinecone import CAPABILITIES, KEY_ENV
from recallstack.adapters.pinecone.filters import compile_filter, within
from recallstack.adapters.pinecone.metadata import ORIGINAL_ID, decode, encode
from recallstack.core.batching import batched
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.filters import Node
from recallstack.core.filters import matches as matches_filter
from recallstack.core.metadata import Metadata
from recallstack.core.runtime.awaiting import Seam, await_only, drained, sleep
from recallstack.core.scores import past_ties, ranked
from recallstack.core.urls import redact, scrub
from recallstack.core.vectors import (
    METRICS,
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    StoredVector,
    keeping_partition,
)

CATALOG = "recallstack-catalog"
"""The namespace holding each index's logical name."""
MAX_BATCH = 1_000
MAX_REQUEST = 1_800_000
"""Bytes of JSON per write request, below Pinecone's 2 MB."""
MAX_WITH_METADATA = 1_000
MAX_TOP_K = 10_000
MAX_ID = 512
NAME_LIMIT = 45
Indexes = dict[str, tuple[int, Metric, Any]]
"""Each index's (dimension, metric, data-plane client), by logical name."""


def pinecone_name(prefix: str, name: str) -> str:
    """A valid Pinecone index name for a logical one: distinct names stay distinct."""
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    room = NAME_LIMIT - len(prefix) - len(digest) - 2
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:room].strip("-")
    return f"{prefix}-{slug}-{digest}" if slug else f"{prefix}-{digest}"


def record_id(id_: str) -> str:
    """The caller's id as Pinecone takes it: a long one (or one that looks mapped) by hash."""
    if len(id_) > MAX_ID or id_.startswith("#"):
        return "#" + hashlib.sha256(id_.encode()).hexdigest()
    return id_


class PineconeVectorStore(VectorStore):
    backend = "pinecone"
    capabilities = CAPABILITIES
    asyncio_driver = True
    """Under AsyncMemory, the SDK's `AsyncPinecone`, awaited (core/runtime/awaiting.py)."""

    def __init__(
        self,
        url: str = "pinecone://",
        *,
        api_key: str | None = None,
        host: str | None = None,
        cloud: str = "aws",
        region: str = "us-east-1",
        namespace: str = "",
        consistency_timeout: float = 60.0,
    ) -> None:
        from pinecone import Pinecone
        from pinecone.errors.exceptions import PineconeError

        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.prefix = parts.netloc or "rs"
        if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,13})", self.prefix):
            raise InvalidInputError(
                f"{redact(url)!r}: the index prefix must be 1 to 14 lowercase letters, "
                "digits or '-'"
            )
        self._key = api_key or query.get("api_key") or os.environ.get(KEY_ENV, "")
        if not self._key:
            raise InvalidInputError(f"pinecone: no API key (pass api_key= or set {KEY_ENV})")
        self.cloud, self.region, self.namespace = cloud, region, namespace
        self.timeout = consistency_timeout
        self.driver_errors = (PineconeError,)  # type: ignore[misc]
        self._host = host or query.get("host")
        try:
            client = Pinecone(api_key=self._key, host=self._host)
        except (PineconeError, ValueError) as exc:  # no network yet: the arguments
            raise InvalidInputError(f"pinecone: {scrub(str(exc), url)}") from None
        except Exception as exc:  # httpx's InvalidURL: a malformed host
            raise InvalidInputError(f"pinecone: host {self._host!r}: {exc}") from None
        self.seam: Seam[tuple[Any, Indexes]] = Seam(
            (client, {}), self._async_client, lambda held: held[0].close()
        )
        """The client and its data-plane clients: blocking, or on each running loop
        `AsyncPinecone` awaited (`AwaitingPinecone`)."""
        self._written: dict[str, list[str]] = {}
        self._removed: dict[str, list[str]] = {}

    @property
    def client(self) -> Any:
        """The client: under AsyncMemory, the running loop's `AsyncPinecone`."""
        return self.seam.current()[0]

    @property
    def _indexes(self) -> Indexes:
        """Each index's shape and data-plane client, cached per client."""
        return self.seam.current()[1]

    async def _async_client(self) -> tuple[AwaitingPinecone, Indexes]:
        from pinecone import AsyncPinecone

        return AwaitingPinecone(AsyncPinecone(api_key=self._key, host=self._host)), {}

    def close(self) -> None:
        """Close each loop's asyncio client, and the blocking client and its indexes'
        data-plane clients (each holds connections)."""
        self.seam.close()
        client, indexes = self.seam.blocking
        for _, _, index in indexes.values():
            index.close()
        client.close()

    # ---- indexes ----------------------------------------------------------------

    def _describe(self, name: str) -> tuple[int, Metric, Any] | None:
        """(dimension, metric, data-plane client) of an index, cached per store."""
        if name in self._indexes:
            return self._indexes[name]
        from pinecone.errors.exceptions import NotFoundError

        try:
            model = self.client.indexes.describe(pinecone_name(self.prefix, name))
        except NotFoundError:
            return None
        if model.host is None or model.dimension is None or model.metric not in METRICS:
            raise BackendError(f"pinecone: index {model.name!r} is not a ready dense index")
        found = (int(model.dimension), model.metric, self.client.index(host=model.host))
        self._indexes[name] = found
        return found

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        found = self._describe(name)
        return None if found is None else (found[0], found[1])

    def _data(self, name: str) -> Any:
        return self._described(name)[2]

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        from pinecone import ServerlessSpec
        from pinecone.errors.exceptions import ConflictError

        with contextlib.suppress(ConflictError):  # created meanwhile, by another store
            self.client.indexes.create(
                name=pinecone_name(self.prefix, name),
                dimension=dimension,
                metric=config.metric,
                spec=ServerlessSpec(cloud=self.cloud, region=self.region),
            )
        self._indexes.pop(name, None)
        data = self._data(name)
        data.upsert(
            vectors=[{"id": "name", "values": [1.0] * dimension, "metadata": {"name": name}}],
            namespace=CATALOG,
        )

    def _list_indexes(self) -> list[str]:
        names = []
        for model in self.client.indexes.list():
            if not model.name.startswith(self.prefix + "-") or model.host is None:
                continue
            found = self.client.index(host=model.host).fetch(ids=["name"], namespace=CATALOG)
            record = found.vectors.get("name")
            if record is not None and record.metadata:
                names.append(str(record.metadata["name"]))
        return names

    def _describe_index(self, name: str) -> IndexStats:
        dimension, metric, data = self._described(name)
        stats = data.describe_index_stats()
        space = stats.namespaces.get(self.namespace or "__default__") or stats.namespaces.get(
            self.namespace
        )
        count = 0 if space is None else int(space.vector_count)
        return IndexStats(dimension=dimension, count=count, metric=metric)

    def _described(self, name: str) -> tuple[int, Metric, Any]:
        found = self._describe(name)
        if found is None:
            raise IndexNotFoundError(name)
        return found

    def _delete_index(self, name: str) -> None:
        self.client.indexes.delete(pinecone_name(self.prefix, name))
        if (gone := self.seam.blocking[1].pop(name, None)) is not None:
            gone[2].close()
        assert self.seam.asyncio is not None
        for _, indexes in self.seam.asyncio.held:
            indexes.pop(name, None)

    # ---- writes -------------------------------------------------------------------

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        records = [
            _record(id_, row, meta)
            for id_, row, meta in zip(batch.ids, batch.vectors, batch.metadata, strict=True)
        ]  # every record is built (and checked) before anything is sent
        self._send(name, records)

    def _send(self, name: str, records: list[dict[str, Any]]) -> None:
        data = self._data(name)
        for chunk in _requests(records):
            data.upsert(vectors=chunk, namespace=self.namespace)
        self._written[name] = [r["id"] for r in records[-64:]]

    def _ids(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> list[str]:
        """Pinecone ids of `target` in the partition: the ids mapped (fetching or deleting
        one that is not stored does nothing, so none is read first, unless the partition
        must be checked), or a filter's matches, listed with filtered queries."""
        data = self._data(name)
        if isinstance(target, list):
            ids = list(dict.fromkeys(record_id(i) for i in target))
            if partition is None:
                return ids
            return [
                pid
                for chunk in batched(ids, MAX_BATCH)
                for pid, stored in data.fetch(ids=chunk, namespace=self.namespace).vectors.items()
                if partition.holds(decode(stored.metadata))
            ]
        dimension = self._described(name)[0]
        matches = data.query(
            vector=[1.0] * dimension,
            top_k=MAX_TOP_K,
            filter=within(None if target is None else compile_filter(target), partition),
            namespace=self.namespace,
        ).matches
        if len(matches) < MAX_TOP_K:
            return [m.id for m in matches]
        # more matches than one query returns: every id, checked against the filter
        found = []
        for page in data.list(namespace=self.namespace):
            ids = [v.id for v in page.vectors]
            for pid, stored in data.fetch(ids=ids, namespace=self.namespace).vectors.items():
                metadata = decode(stored.metadata)
                if matches_filter(target, metadata) and (
                    partition is None or partition.holds(metadata)
                ):
                    found.append(pid)
        return found

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        data = self._data(name)
        found = []
        for chunk in batched([record_id(i) for i in ids], MAX_BATCH):
            for pid, stored in data.fetch(ids=chunk, namespace=self.namespace).vectors.items():
                caller = (stored.metadata or {}).get(ORIGINAL_ID, pid)
                vector = np.asarray(stored.values, dtype=np.float32).tolist()
                found.append(
                    StoredVector(id=caller, vector=vector, metadata=decode(stored.metadata))
                )
        return found

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        data = self._data(name)
        ids = self._ids(name, target, partition)
        changed = []
        for chunk in batched(ids, MAX_BATCH):
            for pid, stored in data.fetch(ids=chunk, namespace=self.namespace).vectors.items():
                kept = decode(stored.metadata)
                caller = (stored.metadata or {}).get(ORIGINAL_ID, pid)
                values = np.asarray(stored.values, dtype=np.float32) if vector is None else vector
                if metadata is not None:
                    kept = keeping_partition(metadata, kept)
                changed.append(_record(caller, values, kept))
        self._send(name, changed)

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        data = self._data(name)
        ids = self._ids(name, target, partition)
        for chunk in batched(ids, MAX_BATCH):
            data.delete(ids=chunk, namespace=self.namespace)
        self._removed[name] = ids[-64:]

    # ---- search ---------------------------------------------------------------------

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
        _, metric, data = self._described(name)
        flt = within(None if filter is None else compile_filter(filter), partition)
        query = vector.tolist()

        def search(n: int, metadata: bool) -> Sequence[Any]:
            found: Sequence[Any] = data.query(
                vector=query,
                top_k=n,
                filter=flt,
                include_metadata=metadata,
                include_values=metadata and include_vector,
                namespace=self.namespace,
            ).matches
            return found

        hits = past_ties(lambda n: search(n, True), top_k, lambda m: m.score, MAX_WITH_METADATA)
        if hits is None:  # more than Pinecone returns with metadata: ids first, then fetch
            found = past_ties(lambda n: search(n, False), top_k, lambda m: m.score, MAX_TOP_K)
            hits = self._fetched(
                data, found if found is not None else search(MAX_TOP_K, False), top_k
            )
        rows = []
        for match in hits:
            stored = match.metadata or {}
            score = (
                1.0 / (1.0 + float(np.sqrt(max(match.score, 0.0))))
                if metric == "euclidean"
                else float(match.score)
            )
            values = list(match.values) if include_vector and match.values else None
            rows.append((score, str(stored.get(ORIGINAL_ID, match.id)), decode(stored), values))
        return ranked(rows, top_k, min_score)

    def _fetched(self, data: Any, matches: Sequence[Any], top_k: int) -> list[Any]:
        """The best matches by (score, id) with their records fetched."""
        ordered = sorted(matches, key=lambda m: m.id)
        ordered.sort(key=lambda m: m.score, reverse=True)
        ordered = ordered[:top_k]
        records: dict[str, Any] = {}
        for chunk in batched([m.id for m in ordered], MAX_BATCH):
            records.update(data.fetch(ids=chunk, namespace=self.namespace).vectors)
        return [
            _Hit(m.id, m.score, records[m.id].metadata, records[m.id].values)
            for m in ordered
            if m.id in records
        ]

    def wait_until_consistent(self, name: str) -> None:
        """Poll fetches until the last written ids are readable and the last deleted
        ones gone, within `consistency_timeout`."""
        written, removed = self._written.pop(name, []), self._removed.pop(name, [])
        if not (written or removed) or self._describe(name) is None:
            return
        data = self._data(name)
        deadline = time.monotonic() + self.timeout
        while True:
            found = (
                data.fetch(ids=written + removed, namespace=self.namespace).vectors
                if written or removed
                else {}
            )
            if all(i in found for i in written) and not any(i in found for i in removed):
                return
            if time.monotonic() > deadline:
                raise BackendError(
                    f"pinecone: writes to {name!r} not visible after {self.timeout:g} s"
                )
            sleep(0.25)


class _Hit:
    """A fetched record in the shape of a query match."""

    def __init__(self, id_: str, score: float, metadata: Any, values: Any) -> None:
        self.id, self.score, self.metadata, self.values = id_, score, metadata, values


def _record(id_: str, row: Matrix, metadata: Metadata) -> dict[str, Any]:
    stored = encode(metadata, id_)
    pid = record_id(id_)
    if pid != id_:
        stored[ORIGINAL_ID] = id_
    return {"id": pid, "values": row.tolist(), "metadata": stored}


def _requests(records: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Records in requests of at most 1,000 and about 1.8 MB of JSON each."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for record in records:
        length = len(json.dumps(record))
        if chunk and (len(chunk) == MAX_BATCH or size + length > MAX_REQUEST):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += length
    if chunk:
        yield chunk


class AwaitingPinecone:
    """The SDK's `AsyncPinecone` with the blocking client's parts this store uses, each
    call awaited with `await_only`."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.indexes = AwaitingIndexes(client.indexes)
        self._made: list[Any] = []
        """The data-plane clients made: each has its own sessions to close."""

    def index(self, *, host: str) -> AwaitingIndex:
        made = await_only(self._client.index(host=host))
        self._made.append(made)
        return AwaitingIndex(made)

    async def close(self) -> None:
        """Close the data-plane clients made, then the client."""
        for made in self._made:
            await made.close()
        await self._client.close()


class AwaitingIndexes:
    """`AsyncPinecone.indexes`, awaited."""

    def __init__(self, indexes: Any) -> None:
        self._indexes = indexes

    def describe(self, name: str) -> Any:
        return await_only(self._indexes.describe(name))

    def create(self, **spec: Any) -> Any:
        return await_only(self._indexes.create(**spec))

    def delete(self, name: str) -> None:
        await_only(self._indexes.delete(name))

    def list(self) -> list[Any]:
        return drained(self._indexes.list())


class AwaitingIndex:
    """The SDK's `AsyncIndex` with the blocking `Index`'s methods this store uses."""

    def __init__(self, index: Any) -> None:
        self._index = index

    def upsert(self, **request: Any) -> Any:
        return await_only(self._index.upsert(**request))

    def fetch(self, **request: Any) -> Any:
        return await_only(self._index.fetch(**request))

    def query(self, **request: Any) -> Any:
        return await_only(self._index.query(**request))

    def delete(self, **request: Any) -> Any:
        return await_only(self._index.delete(**request))

    def describe_index_stats(self) -> Any:
        return await_only(self._index.describe_index_stats())

    def list(self, **request: Any) -> list[Any]:
        return drained(self._index.list(**request))
