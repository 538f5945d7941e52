"""LibSQL vector store: the database is the truth, numpy does the search.

Each index is a table of (id, F32_BLOB vector, metadata JSON, write sequence),
written from raw float32 bytes. Queries are exact: the vectors are cached in
process as one matrix, refreshed incrementally from the write sequence and
reloaded when another connection deleted rows, and scored with numpy. A
filter is compiled to SQL that selects the candidate rows, and only those are
scored, so a filtered query returns the true top-K among matching rows. A
scoped filter (a resource, a thread) takes its candidates from the cache's own
list of each scope's rows instead, so it costs what the scope holds.

`index_config={"type": "diskann"}` adds libSQL's DiskANN index
(`libsql_vector_idx`, cosine or euclidean) and answers unfiltered queries
with `vector_top_k`: approximate, and inserts become far slower (hundreds of
vectors per second instead of tens of thousands). Filtered queries still use
the exact path, so they never return fewer than top_k matching rows.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from recallstack.adapters.libsql import CAPABILITIES, vector_file
from recallstack.adapters.libsql.database import Database
from recallstack.adapters.libsql.sql_filters import (
    compile_filter,
    decode_document,
    encode_document,
    index_statements,
    json_path,
)
from recallstack.adapters.table_names import table_name
from recallstack.core.errors import UnsupportedFeatureError
from recallstack.core.filters import SCOPE_KEYS, Node, scope_of
from recallstack.core.metadata import Metadata
from recallstack.core.scores import Matrix, best, row_norms, score
from recallstack.core.vector_store import VectorBatch, VectorStore
from recallstack.core.vectors import IndexConfig, IndexStats, Metric, QueryResult, trusted_hit

CATALOG = "recallstack_vector_indexes"
_ANN_METRICS: dict[Metric, str] = {"cosine": "cosine", "euclidean": "l2"}


def _catalog(db: Database) -> None:
    db.query(
        f"CREATE TABLE {CATALOG} (name TEXT PRIMARY KEY, table_name TEXT NOT NULL UNIQUE, "
        "dimension INTEGER NOT NULL, metric TEXT NOT NULL, config TEXT NOT NULL, "
        "version INTEGER NOT NULL DEFAULT 0, delete_version INTEGER NOT NULL DEFAULT 0)"
    )


def _generation(db: Database) -> None:
    """Each index gets a random generation, written into its vector file, so that a
    file never stands for another index of the same name or another database."""
    db.query(f"ALTER TABLE {CATALOG} ADD COLUMN generation TEXT NOT NULL DEFAULT ''")
    db.query(f"UPDATE {CATALOG} SET generation = lower(hex(randomblob(8)))")


MIGRATIONS = [_catalog, _generation]
LOAD_PAGE = 20_000
"""Rows read per statement when the cache is loaded from SQL."""
PERSIST_FROM = 1_000
"""Indexes of fewer rows load from SQL in a few milliseconds: they get no vector file."""


@dataclass(frozen=True)
class _Entry:
    """An index's catalog row."""

    table: str
    dimension: int
    metric: Metric
    version: int
    delete_version: int
    config: str
    generation: str

    @property
    def ann(self) -> bool:
        return IndexConfig.model_validate_json(self.config).type == "diskann"


Scopes = list[tuple[Any, ...]]
"""Each row's value of every `SCOPE_KEYS` key, as `_scope_columns` reads them."""


class _Rows:
    """Growable arrays that snapshots of one index share: each snapshot sees a prefix.

    Rows are only ever appended past every snapshot's prefix, so a snapshot a
    query is still reading never changes under it; appending doubles the
    capacity when it runs out, so a write costs what it adds, not the index size.
    `groups` lists the positions of the rows under each scope value, ascending
    (appends keep them so), and `irregular` the scope keys some row holds a list
    under: a scoped query reads its group, not the whole table, unless its key
    is irregular.
    """

    def __init__(self, dimension: int, capacity: int) -> None:
        self.used = 0
        self.rowids = np.empty(capacity, dtype=np.int64)
        self.ids: list[str] = []
        self.matrix: Matrix = np.empty((capacity, dimension), dtype=np.float32)
        self.norms = np.empty(capacity, dtype=np.float64)
        self._scopes: Scopes | None = []
        self.groups: dict[tuple[str, str], list[int]] = {}
        self.irregular: set[str] = set()

    @classmethod
    def mapped(
        cls,
        arrays: dict[str, npt.NDArray[Any]],
        ids: list[str],
        groups: dict[tuple[str, str], list[int]],
        irregular: set[str],
    ) -> _Rows:
        """Rows read from a vector file, without spare capacity: the first write copies."""
        rows = cls(arrays["matrix"].shape[1], 0)
        rows.rowids, rows.matrix, rows.norms = arrays["rowids"], arrays["matrix"], arrays["norms"]
        rows.used = len(ids)
        rows.ids = ids
        rows._scopes = None  # built from the groups if a fold needs them
        rows.groups = groups
        rows.irregular = irregular
        return rows

    @property
    def scopes(self) -> Scopes:
        """Each row's scope values (a list under an irregular key reads as None)."""
        if self._scopes is None:
            values: list[list[str | None]] = [[None] * len(_SCOPE_ORDER) for _ in self.ids]
            for (key, value), positions in self.groups.items():
                column = _SCOPE_ORDER.index(key)
                for position in positions:
                    values[position][column] = value
            self._scopes = [tuple(v) for v in values]
        return self._scopes

    @classmethod
    def of(
        cls,
        rowids: npt.NDArray[np.int64],
        ids: list[str],
        matrix: Matrix,
        scopes: Scopes,
        spare: int = 0,
    ) -> _Rows:
        rows = cls(matrix.shape[1], len(rowids) + spare)
        rows.append(rowids, ids, matrix, scopes)
        return rows

    def append(
        self, rowids: npt.NDArray[np.int64], ids: list[str], matrix: Matrix, scopes: Scopes
    ) -> None:
        start, end = self.used, self.used + len(rowids)
        self.rowids[start:end] = rowids
        self.ids += ids
        self.matrix[start:end] = matrix
        self.norms[start:end] = row_norms(matrix)
        self.scopes.extend(scopes)
        for position, values in enumerate(scopes, start):
            for key, value in zip(_SCOPE_ORDER, values, strict=True):
                if isinstance(value, str):
                    self.groups.setdefault((key, value), []).append(position)
                elif value is not None:  # a list: its members are not grouped
                    self.irregular.add(key)
        self.used = end


@dataclass(frozen=True)
class _Snapshot:
    """The cached vectors of one index, as of catalog (version, delete_version):
    the first `size` rows of `rows`."""

    version: int
    delete_version: int
    metric: Metric
    rows: _Rows
    size: int
    ann: bool = False

    @property
    def rowids(self) -> npt.NDArray[np.int64]:
        return self.rows.rowids[: self.size]

    @property
    def ids(self) -> list[str]:
        """Shared with later snapshots: read only positions below `size`."""
        return self.rows.ids

    @property
    def matrix(self) -> Matrix:
        return self.rows.matrix[: self.size]

    @property
    def norms(self) -> npt.NDArray[np.float64]:
        return self.rows.norms[: self.size]

    def scoped(self, equalities: Mapping[str, str]) -> npt.NDArray[np.intp] | None:
        """Positions of the rows under these scope values, or None when a key is
        irregular (a list somewhere): then only SQL knows which rows match."""
        if any(key in self.rows.irregular for key in equalities):
            return None
        found: npt.NDArray[np.intp] | None = None
        for entry in equalities.items():
            group = np.array(self.rows.groups.get(entry, ()), dtype=np.intp)
            group = group[: np.searchsorted(group, self.size)]  # rows of later snapshots
            found = group if found is None else np.intersect1d(found, group, assume_unique=True)
        return found


class LibSQLVectorStore(VectorStore):
    """Exact search over a libSQL file, with every operator. Safe across threads."""

    backend = "libsql"
    capabilities = CAPABILITIES

    def __init__(self, url: str = "libsql:///local.db", **options: Any) -> None:
        self.db = Database(url, **options)
        self.db.migrate("vector", MIGRATIONS)
        self._snapshots: dict[str, _Snapshot] = {}
        self._persisted: dict[str, int] = {}
        """Rows in each index's vector file (by table), as this store last read or wrote it."""
        self._lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def _entry(self, name: str) -> _Entry | None:
        rows = self.db.query(
            f"SELECT table_name, dimension, metric, version, delete_version, config, generation "
            f"FROM {CATALOG} WHERE name = ?",
            (name,),
        )
        return _Entry(*rows[0]) if rows else None

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        entry = self._entry(name)
        return None if entry is None else (entry.dimension, entry.metric)

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        table = table_name(name)
        if config.type == "diskann" and config.metric not in _ANN_METRICS:
            raise UnsupportedFeatureError(
                f"libSQL's DiskANN index has no {config.metric} metric (cosine or euclidean)"
            )
        with self.db.transaction():
            self.db.query(
                f"INSERT INTO {CATALOG} (name, table_name, dimension, metric, config, generation) "
                "VALUES (?, ?, ?, ?, ?, lower(hex(randomblob(8)))) ON CONFLICT(name) DO NOTHING",
                (name, table, dimension, config.metric, config.model_dump_json()),
            )
            self.db.query(
                f"CREATE TABLE IF NOT EXISTS {table} (rowid INTEGER PRIMARY KEY, "
                f"id TEXT NOT NULL UNIQUE, embedding F32_BLOB({dimension}) NOT NULL, "
                "metadata TEXT NOT NULL, seq INTEGER NOT NULL)"
            )
            self.db.query(f"CREATE INDEX IF NOT EXISTS {table}_seq ON {table} (seq)")
            for statement in index_statements(table):
                self.db.query(statement)
            if config.type == "diskann":
                self.db.query(
                    f"CREATE INDEX IF NOT EXISTS {table}_ann ON {table} "
                    f"(libsql_vector_idx(embedding, 'metric={_ANN_METRICS[config.metric]}'))"
                )

    def _bump(self, name: str, deleted: bool = False) -> int:
        extra = ", delete_version = delete_version + 1" if deleted else ""
        rows = self.db.query(
            f"UPDATE {CATALOG} SET version = version + 1{extra} WHERE name = ? RETURNING version",
            (name,),
        )
        version: int = rows[0][0]
        return version

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        table = table_name(name)
        with self.db.transaction():
            seq = self._bump(name)
            self.db.executemany(
                f"INSERT INTO {table} (id, embedding, metadata, seq) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET embedding = excluded.embedding, "
                "metadata = excluded.metadata, seq = excluded.seq",
                [
                    (id_, vector.tobytes(), encode_document(meta), seq)
                    for id_, vector, meta in zip(
                        batch.ids, batch.vectors, batch.metadata, strict=True
                    )
                ],
            )

    # ---- the cache ----------------------------------------------------------------

    def _snapshot(self, name: str) -> _Snapshot:
        """The index's vectors, brought up to date with the database: from this
        process's cache, else from the vector file, else from every SQL row; then
        the rows written since are folded in."""
        entry = self._entry(name)
        assert entry is not None
        table, dimension = entry.table, entry.dimension
        with self._lock:
            snap = self._snapshots.get(name) or self._mapped(entry)
            if snap is not None and (snap.version, snap.delete_version) == (
                entry.version,
                entry.delete_version,
            ):
                self._snapshots[name] = snap
                return snap
            folded = None
            if snap is not None and snap.delete_version == entry.delete_version:
                # through the seq index: an ORDER BY rowid would tempt SQLite into
                # reading the whole table in rowid order (60 ms at 100,000 rows)
                rows = self.db.query(
                    f"SELECT rowid, id, embedding, {_SCOPE_COLUMNS} FROM {table} "
                    f"INDEXED BY {table}_seq WHERE seq > ?",
                    (snap.version,),
                )
                rows.sort(key=itemgetter(0))
                folded = _apply(snap, rows, dimension, entry.version)
            loaded = folded is None
            if folded is None:
                folded = self._load(entry)
            self._snapshots[name] = folded
            behind = folded.size >= self._persisted.get(table, 0) * 5 / 4
            persist = folded.size >= PERSIST_FROM and (loaded or behind)
            if persist:
                self._persisted[table] = folded.size  # one writer; others go on
        if persist:  # outside the lock: other threads query while the file is written
            self._persist(entry, folded)
        return folded

    def _load(self, entry: _Entry) -> _Snapshot:
        """Every row, read in pages straight into arrays sized for them, so a load
        holds one copy of the vectors, not three (6.5 GB at a million rows before).

        Rows written meanwhile are in a later page or folded in later: the snapshot
        is labelled with the catalog as it was before the first page."""
        (count,) = self.db.query(f"SELECT count(*) FROM {entry.table}")[0]
        rows = _Rows(entry.dimension, count + 1024 + count // 4)  # room for later writes
        last = -1
        while page := self.db.query(
            f"SELECT rowid, id, embedding, {_SCOPE_COLUMNS} FROM {entry.table} "
            f"WHERE rowid > ? ORDER BY rowid LIMIT {LOAD_PAGE}",
            (last,),
        ):
            rowids = np.array([r[0] for r in page], dtype=np.int64)
            if rows.used + len(page) > len(rows.rowids):  # more rows than counted
                rows = _Rows.of(
                    rows.rowids[: rows.used],
                    rows.ids,
                    rows.matrix[: rows.used],
                    rows.scopes,
                    spare=len(page) + rows.used,
                )
            rows.append(rowids, [r[1] for r in page], _matrix(page, entry.dimension), _scopes(page))
            last = page[-1][0]
        return _Snapshot(
            entry.version, entry.delete_version, entry.metric, rows, rows.used, entry.ann
        )

    def _vector_file(self, entry: _Entry) -> Path | None:
        """`<database>-vectors/<table>.rsv` beside a local database file; None otherwise."""
        location = self.db.location
        if location.remote is not None or location.path in ("", ":memory:"):
            return None
        return Path(f"{location.path}-vectors") / f"{entry.table}.rsv"

    def _mapped(self, entry: _Entry) -> _Snapshot | None:
        """The snapshot in the vector file, when there is one for this index as it is:
        same generation, same deletes, no newer than the catalog (later writes are
        folded in by the caller)."""
        path = self._vector_file(entry)
        found = vector_file.read(path) if path is not None else None
        if found is None:
            return None
        header, arrays = found
        try:
            if (
                header["generation"] != entry.generation
                or header["delete_version"] != entry.delete_version
                or not 0 <= header["version"] <= entry.version
                or arrays["matrix"].shape[1:] != (entry.dimension,)
                or len({len(header["ids"]), *(len(a) for a in arrays.values())}) != 1
            ):
                return None
            groups = {
                (key, value): positions
                for key, by_value in header["groups"].items()
                for value, positions in by_value.items()
            }
            rows = _Rows.mapped(arrays, header["ids"], groups, set(header["irregular"]))
        except (KeyError, TypeError, AttributeError, ValueError):  # a header of another shape
            return None
        self._persisted[entry.table] = rows.used
        return _Snapshot(
            header["version"], entry.delete_version, entry.metric, rows, rows.used, entry.ann
        )

    def _persist(self, entry: _Entry, snap: _Snapshot) -> None:
        """Write the snapshot to the vector file (after a full load, or once the rows
        written since the last file are a quarter of it). A file that cannot be
        written only costs the next process a load from SQL."""
        path = self._vector_file(entry)
        if path is None:
            return
        size, groups = snap.size, snap.rows.groups
        by_key: dict[str, dict[str, list[int]]] = {key: {} for key in _SCOPE_ORDER}
        for (key, value), positions in list(groups.items()):
            inside = positions[: bisect.bisect_left(positions, size)]
            if inside:
                by_key[key][value] = inside
        header = {
            "generation": entry.generation,
            "version": snap.version,
            "delete_version": snap.delete_version,
            "ids": snap.ids[:size],
            "groups": by_key,
            "irregular": sorted(snap.rows.irregular),
        }
        arrays: dict[str, npt.NDArray[Any]] = {
            "matrix": snap.matrix,
            "rowids": snap.rowids,
            "norms": snap.norms,
        }
        with contextlib.suppress(OSError):
            vector_file.write(path, header, arrays, like=Path(self.db.location.path))

    # ---- reads ------------------------------------------------------------------

    def _query(
        self,
        name: str,
        vector: Matrix,
        top_k: int,
        filter: Node | None,
        include_vector: bool,
        min_score: float | None,
    ) -> list[QueryResult]:
        snap = self._snapshot(name)
        if filter is None and not snap.ann:
            scores = score(snap.matrix, vector, snap.metric, snap.norms)
            ranked = best(scores, snap.ids, top_k, min_score)
            chosen = [(p, float(scores[p])) for p in ranked]
        else:
            positions = (
                self._candidates(name, snap, filter)
                if filter is not None
                else self._approximate(name, snap, vector, top_k)
            )
            scores = score(snap.matrix[positions], vector, snap.metric, snap.norms[positions])
            every = snap.ids  # one property read, not one per row
            ids = [every[p] for p in positions.tolist()]
            ranked = best(scores, ids, top_k, min_score)
            chosen = [(int(positions[i]), float(scores[i])) for i in ranked]
        metadata = self._metadata(name, [int(snap.rowids[p]) for p, _ in chosen])
        return [
            trusted_hit(
                snap.ids[p],
                s,
                metadata.get(int(snap.rowids[p]), {}),
                snap.matrix[p].tolist() if include_vector else None,
            )
            for p, s in chosen
        ]

    def _approximate(
        self, name: str, snap: _Snapshot, vector: Matrix, top_k: int
    ) -> npt.NDArray[np.intp]:
        """Positions of DiskANN's top_k candidates, scored exactly afterwards."""
        table = table_name(name)
        rows = self.db.query(
            f"SELECT id FROM vector_top_k('{table}_ann', vector32(?), ?)",
            (json.dumps(vector.tolist()), top_k),
        )
        return _positions(snap, rows)

    def _candidates(self, name: str, snap: _Snapshot, filter: Node) -> npt.NDArray[np.intp]:
        """Positions in the snapshot of the rows the filter selects: a scoped filter
        reads its scope's rows from the cache, and SQL checks only those."""
        scope = scope_of(filter, SCOPE_KEYS)
        positions = snap.scoped(scope.equalities) if scope.equalities else None
        if positions is not None and scope.complete:
            return positions
        table = table_name(name)
        sql, params = compile_filter(filter, table)
        if positions is None:
            rows = self.db.query(f"SELECT rowid FROM {table} WHERE {sql}", params)
        else:
            rows = self.db.query(
                f"SELECT rowid FROM {table} "
                f"WHERE rowid IN (SELECT value FROM json_each(?)) AND {sql}",
                [json.dumps(snap.rowids[positions].tolist()), *params],
            )
        return _positions(snap, rows)

    def _metadata(self, name: str, rowids: list[int]) -> dict[int, Metadata]:
        if not rowids:
            return {}
        rows = self.db.query(
            f"SELECT rowid, metadata FROM {table_name(name)} "
            "WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(rowids),),
        )
        return {r[0]: decode_document(r[1]) for r in rows}

    def _describe_index(self, name: str) -> IndexStats:
        entry = self._entry(name)
        assert entry is not None
        (count,) = self.db.query(f"SELECT count(*) FROM {entry.table}")[0]
        return IndexStats(dimension=entry.dimension, count=count, metric=entry.metric)

    def _list_indexes(self) -> list[str]:
        return [r[0] for r in self.db.query(f"SELECT name FROM {CATALOG}")]

    # ---- writes -------------------------------------------------------------------

    def _delete_index(self, name: str) -> None:
        entry = self._entry(name)
        with self.db.transaction():
            self.db.query(f"DROP TABLE IF EXISTS {table_name(name)}")
            self.db.query(f"DELETE FROM {CATALOG} WHERE name = ?", (name,))
        with self._lock:
            self._snapshots.pop(name, None)
            self._persisted.pop(table_name(name), None)
            path = self._vector_file(entry) if entry is not None else None
            if path is not None:
                path.unlink(missing_ok=True)

    def _where(self, name: str, target: list[str] | Node) -> tuple[str, list[Any]]:
        if isinstance(target, list):
            return "id IN (SELECT value FROM json_each(?))", [json.dumps(target)]
        return compile_filter(target, table_name(name))

    def _update(
        self, name: str, target: list[str] | Node, vector: Matrix | None, metadata: Metadata | None
    ) -> None:
        where, params = self._where(name, target)
        sets: list[str] = ["seq = ?"]
        values: list[Any] = []
        if vector is not None:
            sets.append("embedding = ?")
            values.append(vector.tobytes())
        if metadata is not None:
            sets.append("metadata = ?")
            values.append(encode_document(metadata))
        with self.db.transaction():
            seq = self._bump(name)
            self.db.query(
                f"UPDATE {table_name(name)} SET {', '.join(sets)} WHERE {where}",
                [seq, *values, *params],
            )

    def _delete(self, name: str, target: list[str] | Node) -> None:
        """A delete that removes nothing leaves the catalog as it was, so no process
        reloads its cached vectors for it (a save deletes stale chunks, usually none)."""
        where, params = self._where(name, target)
        with self.db.transaction():
            gone = self.db.query(
                f"DELETE FROM {table_name(name)} WHERE {where} RETURNING rowid", params
            )
            if gone:
                self._bump(name, deleted=True)


def _positions(snap: _Snapshot, rows: list[tuple[Any, ...]]) -> npt.NDArray[np.intp]:
    """Positions in the snapshot of the rows with these rowids."""
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    positions = np.searchsorted(snap.rowids, rowids)
    inside = positions < len(snap.rowids)
    positions = positions[inside]
    # rows written after the snapshot was taken are not in it yet
    found: npt.NDArray[np.intp] = positions[snap.rowids[positions] == rowids[inside]]
    return found


def _matrix(rows: list[tuple[Any, ...]], dimension: int) -> Matrix:
    blob = b"".join(r[2] for r in rows)
    return np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dimension)


_SCOPE_ORDER = sorted(SCOPE_KEYS)
_SCOPE_COLUMNS = ", ".join(
    f"CASE json_type(metadata, '{json_path((key,))}') "
    f"WHEN 'text' THEN json_extract(metadata, '{json_path((key,))}') WHEN 'array' THEN 0 END"
    for key in _SCOPE_ORDER
)
"""Each scope key's value after (rowid, id, embedding): the string, 0 for a list (the
key is then irregular), else NULL (absent, or a value `$eq` on a string never matches)."""


def _scopes(rows: list[tuple[Any, ...]]) -> Scopes:
    return [r[3:] for r in rows]


def _apply(
    snap: _Snapshot, rows: list[tuple[Any, ...]], dimension: int, version: int
) -> _Snapshot | None:
    """Fold rows written since the snapshot into it: new ones appended, changed ones
    into a copy (a query may still be reading the snapshot).

    Returns None when new rows do not sort after the snapshot (only a delete
    allows that, and deletes force a reload), so the caller reloads.
    """
    changed = _matrix(rows, dimension)
    rowids = np.array([r[0] for r in rows], dtype=np.int64)
    at = np.searchsorted(snap.rowids, rowids)
    known = at < snap.size
    known[known] = snap.rowids[at[known]] == rowids[known]
    fresh = ~known
    if fresh.any() and snap.size and rowids[fresh].min() <= snap.rowids[-1]:
        return None
    shared, size = snap.rows, snap.size
    added = int(fresh.sum())
    scopes = _scopes(rows)
    if known.any() or shared.used != size or size + added > len(shared.rowids):
        # rows change in place only in a copy; a full buffer (or one a sibling
        # snapshot already grew) is copied with room to double
        spare = max(size + added, 1024)
        kept = shared.scopes[:size]
        for position, values, was in zip(at, scopes, known, strict=True):
            if was:
                kept[position] = values
        shared = _Rows.of(snap.rowids, snap.ids[:size], snap.matrix, kept, spare)
        shared.irregular |= snap.rows.irregular  # a file's rows keep no list values
        shared.matrix[at[known]] = changed[known]
        shared.norms[at[known]] = row_norms(changed[known])
    new_ids = [r[1] for r, new in zip(rows, fresh, strict=True) if new]
    new_scopes = [v for v, new in zip(scopes, fresh, strict=True) if new]
    shared.append(rowids[fresh], new_ids, changed[fresh], new_scopes)
    return _Snapshot(version, snap.delete_version, snap.metric, shared, size + added, snap.ann)
