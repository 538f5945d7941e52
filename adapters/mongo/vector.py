"""MongoDB vector store: one collection per index, two ways to search.

- *exact* (any MongoDB): MongoDB selects the candidates with the part of the
  filter it can (`documents.selection`) within the partition (`in_partition`,
  through the partition keys' indexes), each
  candidate is checked against the rest of the filter, and numpy scores them in
  batches: the true top-K of the matching documents.
- *atlas* (Atlas, or mongod with mongot): a `$vectorSearch` over an Atlas
  vector search index (`atlas.py`), approximate.

`search="auto"` (the default) picks atlas where the deployment answers
`$listSearchIndexes`, exact elsewhere. Which one an index uses is recorded in
the catalog when it is created.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from recallstack.adapters.mongo import CAPABILITIES
from recallstack.adapters.mongo.atlas import AtlasSearch
from recallstack.adapters.mongo.connection import Connection, Search
from recallstack.adapters.mongo.documents import (
    METADATA,
    VECTOR,
    both,
    decode_metadata,
    encode_metadata,
    field_path,
    in_partition,
    selection,
    vector_binary,
    vector_rows,
)
from recallstack.adapters.table_names import table_name
from recallstack.core.batching import batched
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore
from recallstack.core.errors import InvalidInputError, UnsupportedFeatureError
from recallstack.core.filters import Node, matches
from recallstack.core.metadata import Metadata
from recallstack.core.scores import best, score
from recallstack.core.vectors import (
    PARTITION_KEYS,
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    StoredVector,
    trusted_hit,
)

CATALOG = "recallstack_vector_indexes"
CHUNK = 1_000
"""Documents per write and ids per `$in`: no statement grows with the input."""
SCORE_BATCH = 4_096
"""Candidates scored at a time: memory stays bounded however many match."""


def _catalog(db: Any) -> None:
    db[CATALOG].create_index("collection", unique=True)


MIGRATIONS = [_catalog]


class MongoVectorStore(VectorStore):
    backend = "mongo"
    capabilities = CAPABILITIES

    def __init__(
        self,
        url: str,
        *,
        client: Any = None,
        database: str | None = None,
        search: Literal["auto", "atlas", "exact"] = "auto",
        consistency_timeout: float = 60.0,
    ) -> None:
        if search not in ("auto", "atlas", "exact"):
            raise InvalidInputError(f"search must be 'auto', 'atlas' or 'exact', got {search!r}")
        self.connection = Connection(url, client=client, database=database)
        self.asyncio_driver = self.connection.asyncio_driver
        self.driver_errors = self.connection.errors  # type: ignore[misc]
        self.connection.migrate("vector", MIGRATIONS)
        if search == "atlas" and self.connection.stand_in:
            raise UnsupportedFeatureError(
                "mongomock has no Atlas Vector Search; use search='exact'"
            )
        self.search: Search = self.connection.probe_search() if search == "auto" else search
        self.atlas = AtlasSearch(consistency_timeout)
        if self.search == "atlas":
            self.capabilities = CAPABILITIES.model_copy(update={"exact": False})

    @property
    def db(self) -> Any:
        return self.connection.db

    def close(self) -> None:
        self.connection.close()

    # ---- the catalog ----------------------------------------------------------

    def _entry(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.db[CATALOG].find_one({"_id": name})
        return found

    def _collection(self, name: str) -> Any:
        entry = self._entry(name)
        assert entry is not None  # the public method checked that the index exists
        return self.db[entry["collection"]]

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        entry = self._entry(name)
        return None if entry is None else (entry["dimension"], entry["metric"])

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        collection = table_name(name)
        entry = {"collection": collection, "dimension": dimension, "metric": config.metric}
        self.db[CATALOG].update_one(
            {"_id": name}, {"$setOnInsert": {**entry, "search": self.search}}, upsert=True
        )
        stored = self._entry(name)
        assert stored is not None
        for key in PARTITION_KEYS:
            self.db[collection].create_index(field_path((key,)))
        if stored["search"] == "atlas":
            self.atlas.create(self.db[collection], dimension, stored["metric"])

    def _describe_index(self, name: str) -> IndexStats:
        dimension, metric = self._require(name)
        count = self._collection(name).count_documents({})
        return IndexStats(dimension=dimension, count=count, metric=metric)

    def _list_indexes(self) -> list[str]:
        return [entry["_id"] for entry in self.db[CATALOG].find({}, {"_id": 1})]

    def _delete_index(self, name: str) -> None:
        collection = self._collection(name)
        self.db[CATALOG].delete_one({"_id": name})
        collection.drop()

    # ---- writes ---------------------------------------------------------------

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        documents = [
            {"_id": id_, VECTOR: vector_binary(row), METADATA: encode_metadata(meta, id_)}
            for id_, row, meta in zip(batch.ids, batch.vectors, batch.metadata, strict=True)
        ]  # every document is built (and checked) before anything is written
        self._write(self._collection(name), documents)
        self.atlas.wrote(name, batch.ids)

    def _write(self, collection: Any, documents: list[dict[str, Any]]) -> None:
        """Replace documents by id: in one transaction where the deployment has them,
        else chunk by chunk (a crash between leaves ids for `Memory.reindex`)."""
        with self.connection.transaction() as session:
            for chunk in batched(documents, CHUNK):
                self.connection.replace(collection, chunk, session)

    def _matching(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> list[str]:
        """The ids of `target` (ids, a filter, or none: all) that exist in the partition."""
        collection = self._collection(name)
        within = in_partition(partition)
        if isinstance(target, list):
            found: list[str] = []
            for chunk in batched(target, CHUNK):
                query = both({"_id": {"$in": chunk}}, within)
                found += [d["_id"] for d in collection.find(query, {"_id": 1})]
            return found
        query, whole = selection(target)
        query = both(query, within)
        fields = {"_id": 1} if whole else {METADATA: 1}
        return [
            d["_id"]
            for d in collection.find(query, fields)
            if whole or matches(target, decode_metadata(d.get(METADATA, {})))
        ]

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        ids = self._matching(name, target, partition)
        collection = self._collection(name)
        groups: dict[tuple[tuple[str, Any], ...], list[str]] = {(): ids}
        if metadata is not None:  # the partition's keys stay as written: a write each
            groups = {}
            fields = {field_path((k,)): 1 for k in PARTITION_KEYS}
            for chunk in batched(ids, CHUNK):
                for d in collection.find({"_id": {"$in": chunk}}, fields):
                    held = decode_metadata(d.get(METADATA, {}))
                    own = tuple((str(k), held[k]) for k in PARTITION_KEYS if k in held)
                    groups.setdefault(own, []).append(d["_id"])
        with self.connection.transaction() as session:
            for kept, group in groups.items():
                changes: dict[str, Any] = {}
                if vector is not None:
                    changes[VECTOR] = vector_binary(vector)
                if metadata is not None:
                    changes[METADATA] = encode_metadata({**metadata, **dict(kept)}, "update")
                for chunk in batched(group, CHUNK):
                    collection.update_many(
                        {"_id": {"$in": chunk}}, {"$set": changes}, session=session
                    )
        self.atlas.wrote(name, ids)

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        # deleting an id that is not stored is a no-op: ids need no read first, unless
        # the partition must be checked
        if isinstance(target, list) and partition is None:
            ids = target
        else:
            ids = self._matching(name, target, partition)
        collection = self._collection(name)
        with self.connection.transaction() as session:
            for chunk in batched(ids, CHUNK):
                collection.delete_many({"_id": {"$in": chunk}}, session=session)
        self.atlas.deleted(name, ids)

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        entry = self._entry(name)
        assert entry is not None
        collection = self.db[entry["collection"]]
        documents = [
            d
            for chunk in batched(ids, CHUNK)
            for d in collection.find({"_id": {"$in": chunk}}, {VECTOR: 1, METADATA: 1})
        ]
        if not documents:
            return []
        vectors = vector_rows([d[VECTOR] for d in documents], entry["dimension"])
        return [
            StoredVector(id=d["_id"], vector=v.tolist(), metadata=decode_metadata(d[METADATA]))
            for d, v in zip(documents, vectors, strict=True)
        ]

    # ---- search ---------------------------------------------------------------

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
        entry = self._entry(name)
        assert entry is not None
        collection = self.db[entry["collection"]]
        if entry["search"] == "atlas":
            found = self.atlas.candidates(collection, vector, top_k, filter, partition)
        else:
            found = self._candidates(collection, filter, partition)
        top = _TopK(vector, entry["dimension"], entry["metric"], top_k, min_score)
        batch: list[dict[str, Any]] = []
        for document in found:
            batch.append(document)
            if len(batch) == SCORE_BATCH:
                top.add(batch)
                batch = []
        top.add(batch)
        return [
            trusted_hit(
                top.ids[n],
                float(top.scores[n]),
                decode_metadata(top.documents[n][METADATA]),
                top.vectors[n].tolist() if include_vector else None,
            )
            for n in range(len(top.ids))
        ]

    def _candidates(
        self, collection: Any, filter: Node | None, partition: Partition | None
    ) -> Iterable[dict[str, Any]]:
        """Every matching document of the partition, with its vector and metadata (a
        tenth of its bytes: one round trip rather than a second for the winners'):
        selected by MongoDB, the rest of the filter checked here."""
        query, whole = selection(filter)
        documents: Iterable[dict[str, Any]] = collection.find(
            both(query, in_partition(partition)), {VECTOR: 1, METADATA: 1}, batch_size=SCORE_BATCH
        )
        if whole:
            return documents
        return (d for d in documents if matches(filter, decode_metadata(d[METADATA])))

    def wait_until_consistent(self, name: str) -> None:
        """Atlas indexes what was written after a short delay; exact search needs no wait."""
        entry = self._entry(name)
        if entry is not None and entry["search"] == "atlas":
            self.atlas.wait(self.db[entry["collection"]], name, entry["dimension"])


class _TopK:
    """The running best `top_k` of scored documents, best first, ties by id."""

    def __init__(
        self, query: Matrix, dimension: int, metric: Metric, top_k: int, min_score: float | None
    ) -> None:
        self.query, self.metric, self.top_k, self.min_score = query, metric, top_k, min_score
        self.ids: list[str] = []
        self.vectors: Matrix = np.empty((0, dimension), dtype=np.float32)
        self.scores: npt.NDArray[np.float64] = np.empty(0)
        self.documents: list[dict[str, Any]] = []

    def add(self, batch: list[dict[str, Any]]) -> None:
        if not batch:
            return
        matrix = vector_rows([d[VECTOR] for d in batch], self.vectors.shape[1])
        ids = self.ids + [d["_id"] for d in batch]
        vectors = np.concatenate([self.vectors, matrix])
        scores = np.concatenate([self.scores, score(matrix, self.query, self.metric)])
        documents = self.documents + batch
        keep = best(scores, ids, self.top_k, self.min_score)
        self.ids = [ids[n] for n in keep]
        self.vectors, self.scores = vectors[keep], scores[keep]
        self.documents = [documents[n] for n in keep]
