"""LibSQL vector store: the database is the truth, numpy does the search.

Each index is a table of (id, F32_BLOB vector, metadata JSON, write sequence),
written from raw float32 bytes. Queries are exact: the vectors are cached in
process as one matrix, refreshed incrementally from the write sequence and
reloaded when another connection deleted rows, and scored with numpy. A
filter is compiled to SQL that selects the candidate rows, and only those are
scored, so a filtered query returns the true top-K among matching rows. A
partitioned query (a resource, a thread) takes its candidates from the cache's
own list of each partition's rows instead, so it costs what the partition holds.

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
    decode_documents,
    encode_document,
    index_statements,
    json_path,
)
from recallstack.adapters.table_names import table_name
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore
from recallstack.core.errors import UnsupportedFeatureError
from recallstack.core.filters import Node
from recallstack.core.metadata import Metadata
from recallstack.core.scores import best, row_norms, score
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
"""Each row's value of every `PARTITION_KEYS` key, as `_SCOPE_COLUMNS` reads them."""
Key = tuple[str, str]
"""A partition key and one of its values."""


class _Rows:
    """Growable arrays that snapshots of one index share: each snapshot sees a prefix.

    Rows are only ever appended past every snapshot's prefix, in rowid order, so
    a snapshot a query is still reading never changes under it; appending
    grows the capacity by a quarter when it runs out, so a write costs what it adds, not
    the index size.

    The rows need not lie in rowid order: a vector file holds them ordered by
    scope (`_clustered`), so that a resource's rows are one block that is
    scored in place. `sorted_rowids` and `by_rowid` find a row's position from
    its rowid. A scope value's rows are its `blocks` entry (a range of
    positions) and its `groups` entry (positions, ascending, of rows appended
    later); `irregular` lists the scope keys some row holds a list under: a
    scoped query reads its scope's rows, not the whole table, unless its key
    is irregular.
    """

    def __init__(self, dimension: int, capacity: int) -> None:
        self.used = 0
        self.rowids = np.empty(capacity, dtype=np.int64)
        self.sorted_rowids = np.empty(capacity, dtype=np.int64)
        self.by_rowid = np.empty(capacity, dtype=np.intp)
        self.ids: list[str] = []
        self.matrix: Matrix = np.empty((capacity, dimension), dtype=np.float32)
        self.norms = np.empty(capacity, dtype=np.float64)
        self._scopes: Scopes | None = []
        self.blocks: dict[Key, tuple[int, int]] = {}
        self.groups: dict[Key, list[int]] = {}
        self.irregular: set[str] = set()

    @classmethod
    def mapped(
        cls,
        arrays: dict[str, npt.NDArray[Any]],
        ids: list[str],
        blocks: dict[Key, tuple[int, int]],
        groups: dict[Key, list[int]],
        irregular: set[str],
    ) -> _Rows:
        """Rows read from a vector file, without spare capacity: the first write copies."""
        rows = cls(arrays["matrix"].shape[1], 0)
        rows.rowids, rows.matrix, rows.norms = arrays["rowids"], arrays["matrix"], arrays["norms"]
        rows.sorted_rowids, rows.by_rowid = arrays["sorted_rowids"], arrays["by_rowid"]
        rows.used = len(ids)
        rows.ids = ids
        rows._scopes = None  # built from the blocks and groups if a fold needs them
        rows.blocks, rows.groups, rows.irregular = blocks, groups, irregular
        return rows

    @classmethod
    def of(
        cls,
        rowids: npt.NDArray[np.int64],
        ids: list[str],
        matrix: Matrix,
        scopes: Scopes,
        spare: int,
    ) -> _Rows:
        """Rows in any order, grouped afresh, with room for `spare` more."""
        rows = cls(matrix.shape[1], len(rowids) + spare)
        rows._put(0, rowids, ids, matrix, scopes)
        order = np.argsort(rowids, kind="stable")
        rows.sorted_rowids[: len(rowids)] = rowids[order]
        rows.by_rowid[: len(rowids)] = order
        return rows

    def copy(self, size: int, spare: int) -> _Rows:
        """The first `size` rows, with room for `spare` more."""
        rows = _Rows(self.matrix.shape[1], size + spare)
        for name in ("rowids", "sorted_rowids", "by_rowid", "matrix", "norms"):
            getattr(rows, name)[:size] = getattr(self, name)[:size]
        rows.used = size
        rows.ids = self.ids[:size]
        rows._scopes = None if self._scopes is None else self._scopes[:size]
        rows.blocks = dict(self.blocks)  # blocks lie in the rows every snapshot sees
        for key, positions in self.groups.items():
            inside = positions[: bisect.bisect_left(positions, size)]
            if inside:
                rows.groups[key] = inside
        rows.irregular = set(self.irregular)
        return rows

    @property
    def scopes(self) -> Scopes:
        """Each row's scope values (a list under an irregular key reads as None)."""
        if self._scopes is None:
            values: list[list[str | None]] = [[None] * len(_SCOPE_ORDER) for _ in self.ids]
            for (key, value), positions in self.members():
                column = _SCOPE_ORDER.index(key)
                for position in positions:
                    values[position][column] = value
            self._scopes = [tuple(v) for v in values]
        return self._scopes

    def members(self) -> list[tuple[Key, list[int]]]:
        """Every scope value and the positions of its rows."""
        keys = self.blocks.keys() | self.groups.keys()
        return [(key, self.positions(key).tolist()) for key in keys]

    def positions(self, key: Key, size: int | None = None) -> npt.NDArray[np.intp]:
        """Positions (ascending) of the rows under a scope value, among the first `size`."""
        start, end = self.blocks.get(key, (0, 0))
        tail = self.groups.get(key, [])
        if size is not None:
            tail = tail[: bisect.bisect_left(tail, size)]
        block = np.arange(start, end, dtype=np.intp)
        return np.concatenate([block, np.array(tail, dtype=np.intp)]) if tail else block

    def append(
        self, rowids: npt.NDArray[np.int64], ids: list[str], matrix: Matrix, scopes: Scopes
    ) -> None:
        """Add rows whose rowids are ascending and above every row's here."""
        start, end = self.used, self.used + len(rowids)
        self._put(start, rowids, ids, matrix, scopes)
        self.sorted_rowids[start:end] = rowids
        self.by_rowid[start:end] = np.arange(start, end)

    def _put(
        self,
        start: int,
        rowids: npt.NDArray[np.int64],
        ids: list[str],
        matrix: Matrix,
        scopes: Scopes,
    ) -> None:
        end = start + len(rowids)
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

    def find(
        self, rowids: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
        """Which of these rowids the snapshot holds, and the positions of those."""
        sorted_rowids = self.rows.sorted_rowids[: self.size]
        at = np.searchsorted(sorted_rowids, rowids)
        held = at < self.size
        held[held] = sorted_rowids[at[held]] == rowids[held]
        positions: npt.NDArray[np.intp] = self.rows.by_rowid[at[held]]
        return held, positions

    def scoped(self, equalities: Mapping[str, str]) -> npt.NDArray[np.intp] | None:
        """Positions (ascending) of the rows under these scope values, or None when a
        key is irregular (a list somewhere): then only SQL knows which rows match."""
        if any(key in self.rows.irregular for key in equalities):
            return None
        found: npt.NDArray[np.intp] | None = None
        for entry in equalities.items():
            group = self.rows.positions(entry, self.size)
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

    def _persist(self, entry: _Entry, snap: _Snapshot) -> None:
        """Write the snapshot to the vector file, its rows in scope order, for the next
        process to map. A file that cannot be written only costs that process a
        load from SQL."""
        path = self._vector_file(entry)
        if path is None:
            return
        header, arrays = _clustered(snap)
        with contextlib.suppress(OSError):
            vector_file.write(
                path,
                {"generation": entry.generation, **header},
                arrays,
                like=Path(self.db.location.path),
            )

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
                rows = rows.copy(rows.used, spare=len(page) + rows.used)
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
            blocks = {
                (key, value): (int(start), int(end))
                for key, by_value in header["blocks"].items()
                for value, (start, end) in by_value.items()
            }
            groups = {
                (key, value): positions
                for key, by_value in header["groups"].items()
                for value, positions in by_value.items()
            }
            rows = _Rows.mapped(arrays, header["ids"], blocks, groups, set(header["irregular"]))
        except (KeyError, TypeError, AttributeError, ValueError):  # a header of another shape
            return None
        self._persisted[entry.table] = rows.used
        return _Snapshot(
            header["version"], entry.delete_version, entry.metric, rows, rows.used, entry.ann
        )

    # ---- reads ------------------------------------------------------------------

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
        snap = self._snapshot(name)
        if filter is None and partition is None and not snap.ann:
            scores = score(snap.matrix, vector, snap.metric, snap.norms)
            at = np.array(best(scores, snap.ids, top_k, min_score), dtype=np.intp)
            chosen = list(zip(at.tolist(), scores[at].tolist(), strict=True))
        else:
            positions = (
                self._approximate(name, snap, vector, top_k)
                if filter is None and partition is None
                else self._candidates(name, snap, filter, partition)
            )
            scores = _score_at(snap, positions, vector)
            at = np.array(best(scores, _IdsAt(snap.ids, positions), top_k, min_score), np.intp)
            chosen = list(zip(positions[at].tolist(), scores[at].tolist(), strict=True))
        rowids = np.asarray(snap.rowids[[p for p, _ in chosen]]).tolist()
        metadata = self._metadata(name, rowids)
        ids, matrix = snap.ids, snap.matrix
        return [
            trusted_hit(
                ids[p], s, metadata.get(rowid, {}), matrix[p].tolist() if include_vector else None
            )
            for (p, s), rowid in zip(chosen, rowids, strict=True)
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

    def _candidates(
        self, name: str, snap: _Snapshot, filter: Node | None, partition: Partition | None
    ) -> npt.NDArray[np.intp]:
        """Positions in the snapshot of the rows the partition holds and the filter
        selects: the partition's rows come from the cache, and SQL checks only those."""
        positions = snap.scoped(partition.fields()) if partition is not None else None
        if positions is not None and filter is None:
            return positions
        table = table_name(name)
        sql, params = self._where(name, filter, partition if positions is None else None)
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
        # one row: the rows' ids and their documents joined by SQLite, not a row each
        ((found, documents),) = self.db.query(
            f"SELECT json_group_array(rowid), group_concat(metadata) FROM {table_name(name)} "
            "WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(rowids),),
        )
        if documents is None:  # none of them is there any more
            return {}
        return dict(zip(json.loads(found), decode_documents(documents), strict=True))

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        rows = self.db.query(
            f"SELECT id, embedding, metadata FROM {table_name(name)} "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        )
        if not rows:
            return []
        documents = decode_documents(",".join(r[2] for r in rows))
        return [
            StoredVector(id=r[0], vector=np.frombuffer(r[1], dtype=np.float32).tolist(), metadata=m)
            for r, m in zip(rows, documents, strict=True)
        ]

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

    def _where(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> tuple[str, list[Any]]:
        """SQL for the rows of these ids (or that match this filter) that the partition
        holds, each of its keys looked up in its expression index."""
        where: list[str] = []
        params: list[Any] = []
        if isinstance(target, list):
            where.append("id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(target))
        elif target is not None:
            sql, values = compile_filter(target, table_name(name))
            where.append(f"({sql})")
            params += values
        for key, value in (partition.fields() if partition is not None else {}).items():
            where.append(f"json_extract(metadata, '{json_path((key,))}') = ?")
            params.append(value)
        return " AND ".join(where) or "1", params

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        where, params = self._where(name, target, partition)
        sets: list[str] = ["seq = ?"]
        values: list[Any] = []
        if vector is not None:
            sets.append("embedding = ?")
            values.append(vector.tobytes())
        if metadata is not None:  # the partition's keys stay as written
            kept = ", ".join(
                f"'{k}', json_extract(metadata, '{json_path((k,))}')" for k in PARTITION_KEYS
            )
            sets.append(f"metadata = json_patch(?, json_object({kept}))")
            values.append(encode_document(metadata))
        with self.db.transaction():
            seq = self._bump(name)
            self.db.query(
                f"UPDATE {table_name(name)} SET {', '.join(sets)} WHERE {where}",
                [seq, *values, *params],
            )

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        """A delete that removes nothing leaves the catalog as it was, so no process
        reloads its cached vectors for it (a save deletes stale chunks, usually none)."""
        where, params = self._where(name, target, partition)
        with self.db.transaction():
            gone = self.db.query(
                f"DELETE FROM {table_name(name)} WHERE {where} RETURNING rowid", params
            )
            if gone:
                self._bump(name, deleted=True)


def _positions(snap: _Snapshot, rows: list[tuple[Any, ...]]) -> npt.NDArray[np.intp]:
    """Positions (ascending) in the snapshot of the rows with these rowids; rows
    written after the snapshot was taken are not in it yet."""
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return np.sort(snap.find(rowids)[1])


RUN = 64
"""Consecutive rows from which a scope's rows are scored in place rather than gathered."""


def _score_at(
    snap: _Snapshot, positions: npt.NDArray[np.intp], vector: Matrix
) -> npt.NDArray[np.float64]:
    """Scores of the rows at `positions` (ascending). Runs of consecutive rows (a
    resource's block in a vector file) are scored where they lie; gathering
    10,000 scattered rows of a million costs ten times scoring them."""
    if not len(positions):
        return np.empty(0)
    starts = np.flatnonzero(np.diff(positions, prepend=-2) != 1)
    lengths = np.diff(starts, append=len(positions))
    scores = np.empty(len(positions))
    long = lengths >= RUN
    for start, length in zip(starts[long].tolist(), lengths[long].tolist(), strict=True):
        row = int(positions[start])
        scores[start : start + length] = score(
            snap.matrix[row : row + length], vector, snap.metric, snap.norms[row : row + length]
        )
    scattered = np.repeat(~long, lengths)
    if scattered.any():
        rows = positions[scattered]
        scores[scattered] = score(snap.matrix[rows], vector, snap.metric, snap.norms[rows])
    return scores


class _IdsAt:
    """The ids of the rows at `positions`: `best` reads only the few it ranks."""

    def __init__(self, ids: list[str], positions: npt.NDArray[np.intp]) -> None:
        self._ids, self._positions = ids, positions

    def __getitem__(self, index: int) -> str:
        return self._ids[int(self._positions[index])]

    def __len__(self) -> int:
        return len(self._positions)


def _matrix(rows: list[tuple[Any, ...]], dimension: int) -> Matrix:
    blob = b"".join(r[2] for r in rows)
    return np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dimension)


_SCOPE_ORDER = sorted(PARTITION_KEYS)
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
    known, at = snap.find(rowids)
    fresh = ~known
    if fresh.any() and snap.size and rowids[fresh].min() <= snap.rows.sorted_rowids[snap.size - 1]:
        return None
    shared, size = snap.rows, snap.size
    added = int(fresh.sum())
    scopes = _scopes(rows)
    if known.any():
        # rows change in place only in a copy; one that moved to another scope
        # means grouping every row again
        kept = shared.scopes[:size]
        moved = False
        moving = [values for values, was in zip(scopes, known, strict=True) if was]
        for position, values in zip(at.tolist(), moving, strict=True):
            moved |= kept[position] != values
            kept[position] = values
        if moved:
            shared = _Rows.of(snap.rowids, snap.ids[:size], snap.matrix, kept, _spare(size, added))
            shared.irregular |= snap.rows.irregular  # a file's rows keep no list values
        else:
            shared = shared.copy(size, _spare(size, added))
        shared.matrix[at] = changed[known]
        shared.norms[at] = row_norms(changed[known])
    elif shared.used != size or size + added > len(shared.rowids):
        # a full buffer (or a mapped file, or one a sibling snapshot already grew) is copied
        shared = shared.copy(size, _spare(size, added))
    new_ids = [r[1] for r, new in zip(rows, fresh, strict=True) if new]
    new_scopes = [v for v, new in zip(scopes, fresh, strict=True) if new]
    shared.append(rowids[fresh], new_ids, changed[fresh], new_scopes)
    return _Snapshot(version, snap.delete_version, snap.metric, shared, size + added, snap.ann)


def _spare(size: int, added: int) -> int:
    """Room for rows to come when `size` rows are copied to add `added`: a quarter more
    (a mapped file has no room, and doubling a million rows would cost 1.5 GB)."""
    return added + max(size // 4, 1024)


def _clustered(snap: _Snapshot) -> tuple[dict[str, Any], dict[str, Any]]:
    """The vector file's header and arrays for the snapshot, its rows ordered by
    resource, then thread, then rowid: each resource's rows (and each thread's,
    when it holds one resource's rows) become one block of positions."""
    size = snap.size
    ranks = []
    names: dict[str, list[str]] = {}
    for key in _SCOPE_ORDER:
        rank = np.full(size, -1, dtype=np.int64)  # no string value: first, in no block
        values = sorted(v for k, v in snap.rows.blocks.keys() | snap.rows.groups.keys() if k == key)
        for number, value in enumerate(values):
            rank[snap.rows.positions((key, value), size)] = number
        ranks.append(rank)
        names[key] = values
    order = np.lexsort((snap.rowids, *reversed(ranks)))
    blocks: dict[str, dict[str, tuple[int, int]]] = {}
    groups: dict[str, dict[str, list[int]]] = {}
    for key, rank in zip(_SCOPE_ORDER, ranks, strict=True):
        ranked = rank[order]
        starts = np.flatnonzero(np.diff(ranked, prepend=-2) != 0)
        ends = np.append(starts[1:], size)
        runs = np.bincount(ranked[starts] + 1, minlength=len(names[key]) + 1)[1:]
        blocks[key], groups[key] = {}, {}
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            number = int(ranked[start])
            if number >= 0 and runs[number] == 1:
                blocks[key][names[key][number]] = (start, end)
        for number in np.flatnonzero(runs > 1).tolist():
            groups[key][names[key][number]] = np.flatnonzero(ranked == number).tolist()
    placed = np.empty(size, dtype=np.intp)
    placed[order] = np.arange(size)  # a row's position in the file
    header = {
        "version": snap.version,
        "delete_version": snap.delete_version,
        "ids": [snap.ids[p] for p in order.tolist()],
        "blocks": blocks,
        "groups": groups,
        "irregular": sorted(snap.rows.irregular),
    }
    arrays = {
        "matrix": vector_file.Reordered(snap.matrix, order),
        "rowids": snap.rowids[order],
        "norms": snap.norms[order],
        "sorted_rowids": snap.rows.sorted_rowids[:size],
        "by_rowid": placed[snap.rows.by_rowid[:size]],
    }
    return header, arrays
