"""Atlas Vector Search: the index definition, the `$vectorSearch` pipeline, and
waiting for Atlas to catch up with writes.

Atlas filters only on fields its index declares, so the index declares the
scope keys and the id; the pipeline pushes the filter's conditions on those
(`documents.selection`), and every candidate is checked against the whole
filter afterwards, fetching more candidates until top_k match or Atlas's limit
is reached. Atlas's normalised scores are not used: each candidate is scored
from its stored vector like on every other backend (docs/spec/backends.md §3).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from recallstack.adapters.mongo.documents import (
    METADATA,
    VECTOR,
    both,
    decode_metadata,
    field_path,
    in_partition,
    selection,
    vector_rows,
)
from recallstack.core.errors import BackendError
from recallstack.core.filters import Node, matches
from recallstack.core.runtime.awaiting import sleep
from recallstack.core.vectors import PARTITION_KEYS, Matrix, Metric, Partition

INDEX = "recallstack_vectors"
"""The name of the vector search index in each index's collection."""
FILTER_KEYS = (*PARTITION_KEYS, "message_id", "role")
"""The metadata fields the search index can filter on: the partition's, and two that
Memory's filters name."""
FILTER_PATHS = frozenset((key,) for key in FILTER_KEYS)
SIMILARITY: dict[Metric, str] = {
    "cosine": "cosine",
    "euclidean": "euclidean",
    "dotproduct": "dotProduct",
}
MAX_CANDIDATES = 10_000
"""Atlas's largest `numCandidates` (and so `limit`)."""
OVERSAMPLING = 10
"""`numCandidates` per result asked for, as Atlas recommends (10 to 20)."""
REMEMBERED = 64
"""Written or deleted ids per index that `wait` checks for."""
POLL = 0.5


def index_definition(dimension: int, metric: Metric) -> dict[str, Any]:
    """The Atlas vector search index recallstack creates (and a user may create
    by hand, named `recallstack_vectors`, on each index's collection)."""
    fields: list[dict[str, Any]] = [
        {
            "type": "vector",
            "path": VECTOR,
            "numDimensions": dimension,
            "similarity": SIMILARITY[metric],
        }
    ]
    fields += [{"type": "filter", "path": "_id"}]
    fields += [{"type": "filter", "path": field_path((key,))} for key in FILTER_KEYS]
    return {"fields": fields}


def pipeline(
    vector: list[float], limit: int, pre_filter: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """A `$vectorSearch` for `limit` results among `OVERSAMPLING` times as many
    candidates, projecting the vector and the metadata."""
    stage: dict[str, Any] = {
        "index": INDEX,
        "path": VECTOR,
        "queryVector": vector,
        "numCandidates": min(MAX_CANDIDATES, max(limit * OVERSAMPLING, 100)),
        "limit": limit,
    }
    if pre_filter:
        stage["filter"] = pre_filter
    return [{"$vectorSearch": stage}, {"$project": {VECTOR: 1, METADATA: 1}}]


def first_limit(top_k: int, whole: bool) -> int:
    """How many results to ask for first: top_k when Atlas applies the whole filter,
    four times as many when some of it is checked afterwards."""
    return min(MAX_CANDIDATES, top_k if whole else top_k * 4)


class AtlasSearch:
    """What the vector store does on an index whose search is `atlas`."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.written: dict[str, list[str]] = {}
        self.removed: dict[str, list[str]] = {}

    def create(self, collection: Any, dimension: int, metric: Metric) -> None:
        """Create the search index unless it exists, and wait until it answers."""
        if not list(collection.list_search_indexes(INDEX)):
            collection.create_search_index(
                {
                    "name": INDEX,
                    "type": "vectorSearch",
                    "definition": index_definition(dimension, metric),
                }
            )
        self._until(
            lambda: any(i.get("queryable") for i in collection.list_search_indexes(INDEX)),
            f"the Atlas search index of {collection.name!r} did not become queryable",
        )

    def candidates(
        self,
        collection: Any,
        vector: Matrix,
        top_k: int,
        filter: Node | None,
        partition: Partition | None,
    ) -> Iterable[dict[str, Any]]:
        """Documents of the partition that match the filter, nearest first by Atlas's
        ranking: at least top_k when that many match among Atlas's `MAX_CANDIDATES`."""
        pre_filter, whole = selection(filter, FILTER_PATHS)
        pre_filter = both(pre_filter, in_partition(partition, explicit=True))
        limit = first_limit(top_k, whole)
        query = vector.tolist()
        while True:
            found = list(collection.aggregate(pipeline(query, limit, pre_filter)))
            hits = [
                d for d in found if whole or matches(filter, decode_metadata(d.get(METADATA, {})))
            ]
            if len(hits) >= top_k or len(found) < limit or limit == MAX_CANDIDATES:
                return hits
            limit = min(MAX_CANDIDATES, limit * 4)

    def wrote(self, name: str, ids: list[str]) -> None:
        self.written[name] = ids[-REMEMBERED:]
        self.removed.pop(name, None)

    def deleted(self, name: str, ids: list[str]) -> None:
        self.removed[name] = ids[-REMEMBERED:]

    def wait(self, collection: Any, name: str, dimension: int) -> None:
        """Poll until the last written ids are found by a search, and the last deleted
        ones are not, within the timeout."""
        written, removed = self.written.pop(name, []), self.removed.pop(name, [])
        if written:
            stored = collection.find_one({"_id": written[-1]}, {VECTOR: 1})
            if stored is not None:
                probe: list[float] = vector_rows([stored[VECTOR]], dimension)[0].tolist()
                self._until(
                    lambda: len(self._ids(collection, probe, written)) == len(written),
                    f"Atlas Search did not index the writes to {name!r}",
                )
        if removed:
            probe = [1.0] * dimension
            self._until(
                lambda: not self._ids(collection, probe, removed),
                f"Atlas Search still finds vectors deleted from {name!r}",
            )

    def _ids(self, collection: Any, probe: list[float], ids: list[str]) -> list[str]:
        stages = pipeline(probe, len(ids), {"_id": {"$in": ids}})
        return [d["_id"] for d in collection.aggregate(stages)]

    def _until(self, done: Any, failure: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not done():
            if time.monotonic() > deadline:
                raise BackendError(f"mongodb: {failure} within {self.timeout:g} s")
            sleep(POLL)  # asyncio.sleep under AsyncMemory
