"""The Qdrant Edge driver: Qdrant's own engine in process, one shard per index.

URL: `qdrant+edge:///path/to/folder` (`qdrant+edge:////abs/path` for an
absolute one). `recallstack.json` in the folder records each index's shard
directory, dimension and metric.

Edge runs no background optimizer: a shard builds its HNSW index and merges
segments only when `optimize()` is called, and the call holds the GIL. So the
first search after writes optimizes the shard: writes stay fast, searches
stay fast, and a bulk load pays for its index once, on its first search.

Searches run on one thread by default (`search_threads=1`): Edge's default
pool, sized by CPU count, hands every search's segments to worker threads, and
on a 2-core machine that costs more than it saves. A raw shard answers a
filtered top-10 in 0.04 ms instead of 0.12 ms at 10,000 vectors and in 0.37 ms
instead of 0.41 ms at 100,000 (bench/qdrant_chroma.py), and two threads
querying at once answer 6,500 queries/s instead of 4,400. `search_threads=None`
restores Edge's default, which may pay off for large shards on many cores.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from recallstack.adapters.qdrant.filters import Dialect
from recallstack.adapters.qdrant.payload import INDEXED_FIELDS
from recallstack.adapters.table_names import table_name
from recallstack.core.errors import IndexNotFoundError, InvalidInputError
from recallstack.core.inputs import is_positive_int
from recallstack.core.urls import redact
from recallstack.core.vectors import IndexConfig, Metric


def folder_of(url: str) -> Path:
    prefix = "qdrant+edge:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise InvalidInputError(f"{redact(url)!r}: write qdrant+edge:///path/to/folder")
    return Path(url[len(prefix) :])


def _version(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


class EdgeDriver:
    asyncio_driver = False
    """Qdrant's engine in process: CPU work, done in a worker thread under `AsyncMemory`."""
    filters_each_point = False
    """Edge filters through its payload indexes."""

    def __init__(self, url: str, search_threads: int | None = 1) -> None:
        import qdrant_edge as q

        if search_threads is not None and not is_positive_int(search_threads):
            raise InvalidInputError(
                f"search_threads must be a positive int or None, got {search_threads!r}"
            )
        self.q = q
        self.search_threads = search_threads
        self.folder = folder_of(url)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.dialect = Dialect(
            match=lambda key, value: q.FieldCondition(key, match=q.MatchValue(value)),
            match_any=lambda key, values: q.FieldCondition(key, match=q.MatchAny(values)),
            range=lambda key, bounds: q.FieldCondition(key, range=q.RangeFloat(**bounds)),
            is_null=lambda key: q.IsNullCondition(key),
            is_empty=lambda key: q.IsEmptyCondition(key),
            filter=lambda must=None, should=None, must_not=None: q.Filter(
                must=must, should=should, must_not=must_not
            ),
        )
        self._path = self.folder / "recallstack.json"
        self._read: tuple[tuple[int, int, int] | None, dict[str, dict[str, Any]]] = (None, {})
        self._shards: dict[str, Any] = {}
        self._unoptimized: set[str] = set()
        self._lock = threading.RLock()

    # ---- the catalog ------------------------------------------------------------------

    def _catalog(self) -> dict[str, dict[str, Any]]:
        """The catalog file's contents, parsed again only when the file changed.

        Every query asks for its index's shape: a `stat` costs a microsecond,
        reading and parsing the file about sixty. Callers copy before changing it.
        """
        try:
            stat = os.stat(self._path)
        except FileNotFoundError:
            return {}
        if _version(stat) != self._read[0]:
            self._read = (_version(stat), json.loads(self._path.read_text()))
        return self._read[1]

    def _save(self, catalog: dict[str, dict[str, Any]]) -> None:
        temporary = self._path.with_suffix(".tmp")
        temporary.write_text(json.dumps(catalog, indent=1))
        temporary.replace(self._path)
        self._read = (_version(self._path.stat()), catalog)

    def indexes(self) -> dict[str, tuple[int, Metric]]:
        return {n: (e["dimension"], e["metric"]) for n, e in self._catalog().items()}

    def shape(self, name: str) -> tuple[int, Metric] | None:
        entry = self._catalog().get(name)
        return None if entry is None else (entry["dimension"], entry["metric"])

    def _shard(self, name: str) -> Any:
        with self._lock:
            if name not in self._shards:
                entry = self._catalog().get(name)
                if entry is None:
                    raise IndexNotFoundError(name)
                self._shards[name] = self.q.EdgeShard.load(
                    str(self.folder / entry["dir"]),
                    self._config(entry["dimension"], entry["metric"]),  # hnsw: as persisted
                )
                self._unoptimized.add(name)  # it may have been written to and not optimized
            return self._shards[name]

    def _config(self, dimension: int, metric: Metric, hnsw: Any = None) -> Any:
        q = self.q
        distance = {"cosine": q.Distance.Cosine, "euclidean": q.Distance.Euclid}.get(
            metric, q.Distance.Dot
        )
        return q.EdgeConfig(
            # the default vector (named ""): a point's vector is then a plain list, which
            # Edge's binding converts 2.5 µs faster than a {name: list}
            vectors=q.EdgeVectorParams(size=dimension, distance=distance),
            hnsw_config=hnsw,
            # None would keep what the shard has; 0 is Edge's CPU-sized pool, said outright
            max_search_threads=0 if self.search_threads is None else self.search_threads,
        )

    def create(self, name: str, dimension: int, config: IndexConfig) -> None:
        q = self.q
        hnsw = q.HnswIndexConfig(
            m=config.m, ef_construct=config.ef_construction, full_scan_threshold=10_000
        )
        directory = table_name(name)
        with self._lock:
            (self.folder / directory).mkdir(parents=True, exist_ok=True)
            shard = q.EdgeShard.create(
                str(self.folder / directory), self._config(dimension, config.metric, hnsw)
            )
            for key in INDEXED_FIELDS:
                shard.update(q.UpdateOperation.create_field_index(key, q.PayloadSchemaType.Keyword))
            self._shards[name] = shard
            catalog = dict(self._catalog())
            catalog[name] = {"dir": directory, "dimension": dimension, "metric": config.metric}
            self._save(catalog)

    def drop(self, name: str) -> None:
        with self._lock:
            shard = self._shards.pop(name, None)
            self._unoptimized.discard(name)
            if shard is not None:
                shard.close()
            catalog = dict(self._catalog())
            entry = catalog.pop(name)
            shutil.rmtree(self.folder / entry["dir"], ignore_errors=True)
            self._save(catalog)

    def close(self) -> None:
        with self._lock:
            for shard in self._shards.values():
                shard.close()
            self._shards.clear()

    # ---- points -----------------------------------------------------------------------

    def _write(self, name: str, operation: Any) -> None:
        self._shard(name).update(operation)
        self._unoptimized.add(name)

    def _searchable(self, name: str) -> Any:
        """The shard, optimized first if it was written to since it last was."""
        shard = self._shard(name)
        if name in self._unoptimized:
            with self._lock:
                if name in self._unoptimized:
                    self._unoptimized.discard(name)  # first: a write meanwhile marks it again
                    shard.optimize()
        return shard

    def upsert(self, name: str, points: Iterable[tuple[str, list[float], dict[str, Any]]]) -> None:
        q = self.q
        self._write(name, q.UpdateOperation.upsert_points([q.Point(*point) for point in points]))

    def search(
        self,
        name: str,
        vector: list[float],
        limit: int,
        filter: Any,
        with_vector: bool,
        exact: bool,
    ) -> list[tuple[dict[str, Any], float, list[float] | None]]:
        q = self.q
        hits = self._searchable(name).query(
            q.QueryRequest(
                limit=limit,
                query=q.Query.Nearest(vector),
                filter=filter,
                with_payload=True,
                with_vector=with_vector,
                params=q.SearchParams(exact=True) if exact else None,
            )
        )
        return [(h.payload, float(h.score), h.vector if with_vector else None) for h in hits]

    def points(
        self, name: str, ids: list[str] | None, filter: Any
    ) -> list[tuple[str, dict[str, Any]]]:
        shard = self._shard(name)
        if ids is not None:
            found = shard.retrieve(ids, True, False)
        else:
            found, offset = [], None
            while True:
                page, offset = shard.scroll(
                    self.q.ScrollRequest(
                        offset=offset, limit=1000, filter=filter, with_payload=True
                    )
                )
                found += page
                if offset is None:
                    break
        return [(str(r.id), r.payload) for r in found]

    def stored(self, name: str, ids: list[str]) -> list[tuple[dict[str, Any], list[float]]]:
        return [(r.payload, r.vector) for r in self._shard(name).retrieve(ids, True, True)]

    def delete(self, name: str, ids: list[str] | None, filter: Any) -> None:
        q = self.q
        operation = (
            q.UpdateOperation.delete_points(ids)
            if ids is not None
            else q.UpdateOperation.delete_points_by_filter(filter)
        )
        self._write(name, operation)

    def set_vector(self, name: str, pid: str, vector: list[float]) -> None:
        q = self.q
        self._write(name, q.UpdateOperation.update_vectors([q.PointVectors(pid, vector)]))

    def set_payload(self, name: str, pid: str, payload: dict[str, Any]) -> None:
        self._write(name, self.q.UpdateOperation.overwrite_payload([pid], payload))

    def count(self, name: str) -> int:
        counted: int = self._shard(name).count(self.q.CountRequest(exact=True))
        return counted
