"""Postgres + pgvector vector store: one table per index, HNSW or IVFFlat or exact.

Each index is a table (id, vector(d), jsonb metadata) with a GIN index on the
metadata. Search: with `search="exact"` every query is an exact scan. With
the default `search="auto"`, a query whose filter matches at most
`exact_below` rows (counted cheaply through the GIN index) is answered by an
exact scan of just those rows, which is both faster and exact; otherwise the
ANN index answers, with pgvector's iterative scan so that a filter still
yields top_k rows. IVFFlat is built only once the table holds `lists * 10`
rows; until then queries are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from recallstack.adapters.pg import CAPABILITIES
from recallstack.adapters.pg.database import Database
from recallstack.adapters.pg.sql_filters import (
    compile_filter,
    in_partition,
    index_name,
    index_statements,
)
from recallstack.adapters.table_names import table_name
from recallstack.core.contracts.vector_store import VectorBatch, VectorStore
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.filters import Node
from recallstack.core.inputs import is_positive_int
from recallstack.core.metadata import Metadata
from recallstack.core.scores import from_distance, past_ties, ranked
from recallstack.core.vectors import (
    PARTITION_KEYS,
    IndexConfig,
    IndexStats,
    Matrix,
    Metric,
    Partition,
    QueryResult,
    StoredVector,
)

CATALOG = "recallstack_vector_indexes"
PGVECTOR_EF_SEARCH = 40
"""pgvector's default `hnsw.ef_search`; only other values are set, per query."""
PGVECTOR_MAX_EF_SEARCH = 1000
"""pgvector's largest `hnsw.ef_search`: an HNSW query never asks for more rows than this."""
OPERATORS: dict[Metric, tuple[str, str]] = {
    "cosine": ("<=>", "vector_cosine_ops"),
    "euclidean": ("<->", "vector_l2_ops"),
    "dotproduct": ("<#>", "vector_ip_ops"),
}


def _catalog(cur: Any) -> None:
    cur.execute(
        f"CREATE TABLE {CATALOG} (name text PRIMARY KEY, table_name text NOT NULL UNIQUE, "
        "dimension integer NOT NULL, metric text NOT NULL, config jsonb NOT NULL)"
    )


def _named_indexes(cur: Any) -> None:
    """Indexes of tables whose names were too long for `<table>_<suffix>` are made
    again under names that fit (`index_name`); the cut one that was made stays."""
    cur.execute(f"SELECT table_name FROM {CATALOG}")
    for (table,) in cur.fetchall():
        for statement in index_statements(table):
            cur.execute(statement)


@dataclass(frozen=True)
class _Info:
    table: str
    dimension: int
    metric: Metric
    config: IndexConfig


@dataclass(frozen=True)
class _Search:
    """One query, as every plan that may answer it needs it."""

    name: str
    info: _Info
    fields: str
    """The columns to return before the distance."""
    op: str
    """pgvector's distance operator for the index's metric."""
    where: str
    params: list[Any]
    """The query vector, then the filter's parameters."""
    top_k: int


class PgVectorStore(VectorStore):
    backend = "pg"
    asyncio_driver = True

    def __init__(
        self,
        url: str,
        *,
        search: Literal["auto", "exact"] = "auto",
        exact_below: int = 5000,
        ef_search: int = PGVECTOR_EF_SEARCH,
        probes: int = 10,
        **pool: Any,
    ) -> None:
        if not is_positive_int(ef_search) or ef_search > PGVECTOR_MAX_EF_SEARCH:
            raise InvalidInputError(
                f"ef_search must be from 1 to {PGVECTOR_MAX_EF_SEARCH} (pgvector's range), "
                f"got {ef_search!r}"
            )
        self.db = Database(url, **pool)
        self.db.migrate("vector", [_catalog, _named_indexes])
        self.search = search
        self.exact_below = exact_below
        self.ef_search = ef_search
        self.probes = probes
        self.capabilities = CAPABILITIES.model_copy(update={"exact": search == "exact"})
        self._infos: dict[str, _Info] = {}
        """Catalog rows by index name; single dict operations need no lock."""

    def close(self) -> None:
        self.db.close()

    # ---- the catalog ----------------------------------------------------------------

    def _info(self, name: str) -> _Info | None:
        info = self._infos.get(name)
        if info is not None:
            return info
        rows = self.db.query(
            f"SELECT table_name, dimension, metric, config FROM {CATALOG} WHERE name = %s", (name,)
        )
        if not rows:
            return None
        table, dimension, metric, config = rows[0]
        info = _Info(table, dimension, metric, IndexConfig.model_validate(config))
        self._infos[name] = info
        return info

    def _need(self, name: str) -> _Info:
        info = self._info(name)
        if info is None:
            raise IndexNotFoundError(name)
        return info

    def _shape(self, name: str) -> tuple[int, Metric] | None:
        info = self._info(name)
        return None if info is None else (info.dimension, info.metric)

    def _run(self, name: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """A statement on an index's table; a table dropped elsewhere is a missing index."""
        try:
            return self.db.query(sql, params)
        except BackendError as exc:
            if "does not exist" in str(exc):
                self._infos.pop(name, None)
                raise IndexNotFoundError(name) from exc
            raise

    def _create_index(self, name: str, dimension: int, config: IndexConfig) -> None:
        table = table_name(name)
        kind = config.type or "hnsw"
        stored = config.model_copy(update={"type": kind})
        with self.db.cursor(transaction=True) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            cur.execute(
                f'CREATE TABLE IF NOT EXISTS {table} (id text COLLATE "C" PRIMARY KEY, '
                f"embedding vector({dimension}) NOT NULL, metadata jsonb NOT NULL)"
            )
            cur.execute(
                f"CREATE INDEX IF NOT EXISTS {index_name(table, 'meta')} ON {table} "
                "USING gin (metadata jsonb_path_ops)"
            )
            for statement in index_statements(table):
                cur.execute(statement)
            if kind == "hnsw":
                cur.execute(self._ann_statement(table, config.metric, stored))
            cur.execute(
                f"INSERT INTO {CATALOG} VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING",
                (name, table, dimension, config.metric, stored.model_dump_json()),
            )

    @staticmethod
    def _ann_statement(table: str, metric: Metric, config: IndexConfig) -> str:
        opclass = OPERATORS[metric][1]
        if config.type == "ivfflat":
            return (
                f"CREATE INDEX IF NOT EXISTS {index_name(table, 'ann')} ON {table} "
                f"USING ivfflat (embedding {opclass}) WITH (lists = {int(config.lists)})"
            )
        return (
            f"CREATE INDEX IF NOT EXISTS {index_name(table, 'ann')} ON {table} "
            f"USING hnsw (embedding {opclass}) "
            f"WITH (m = {int(config.m)}, ef_construction = {int(config.ef_construction)})"
        )

    def build_index(self, name: str, config: IndexConfig | dict[str, Any]) -> None:
        """Build (or replace) an index's ANN index, e.g. HNSW after a bulk load into `flat`.

        Uses 1 GB of maintenance memory and parallel workers, as pgvector advises.
        """
        info = self._need(name)
        wanted = IndexConfig.model_validate(config).model_copy(update={"metric": info.metric})
        with self.db.cursor(transaction=True) as cur:
            cur.execute("SET LOCAL maintenance_work_mem = '1GB'")
            cur.execute(f"DROP INDEX IF EXISTS {index_name(info.table, 'ann')}")
            if wanted.type in ("hnsw", "ivfflat"):
                cur.execute(self._ann_statement(info.table, info.metric, wanted))
            cur.execute(
                f"UPDATE {CATALOG} SET config = %s WHERE name = %s",
                (wanted.model_dump_json(), name),
            )
        self._infos.pop(name, None)

    # ---- writes ---------------------------------------------------------------------

    def _upsert(self, name: str, batch: VectorBatch) -> None:
        from psycopg.types.json import Jsonb

        info = self._need(name)
        try:
            with self.db.cursor(transaction=True) as cur:
                cur.execute(
                    f"CREATE TEMP TABLE recallstack_stage (LIKE {info.table}) ON COMMIT DROP"
                )
                with cur.copy(
                    "COPY recallstack_stage (id, embedding, metadata) "
                    "FROM STDIN WITH (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["text", "vector", "jsonb"])
                    for row in zip(batch.ids, batch.vectors, batch.metadata, strict=True):
                        copy.write_row((row[0], row[1], Jsonb(row[2])))
                cur.execute(
                    f"INSERT INTO {info.table} SELECT * FROM recallstack_stage "
                    "ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding, "
                    "metadata = excluded.metadata"
                )
        except BackendError as exc:
            if "does not exist" in str(exc):
                raise IndexNotFoundError(name) from exc
            raise
        self.db.wrote((info.table,), len(batch.ids))
        if info.config.type == "ivfflat" and not self._has_ann(info):
            (count,) = self._run(name, f"SELECT count(*) FROM {info.table}")[0]
            if count >= info.config.lists * 10:
                self.db.query(self._ann_statement(info.table, info.metric, info.config))

    def _has_ann(self, info: _Info) -> bool:
        rows = self.db.query("SELECT to_regclass(%s) IS NOT NULL", (index_name(info.table, "ann"),))
        return bool(rows[0][0])

    def _where(
        self, target: list[str] | Node | None, partition: Partition | None
    ) -> tuple[str, list[Any]]:
        """SQL for the rows of these ids (or that match this filter) that the partition
        holds."""
        where: list[str] = []
        params: list[Any] = []
        if isinstance(target, list):
            where.append("id = ANY(%s)")
            params.append(target)
        elif target is not None:
            sql, values = compile_filter(target)
            where.append(f"({sql})")
            params += values
        if partition is not None:
            sql, values = in_partition(partition)
            where.append(sql)
            params += values
        return " AND ".join(where) or "TRUE", params

    def _update(
        self,
        name: str,
        target: list[str] | Node,
        partition: Partition | None,
        vector: Matrix | None,
        metadata: Metadata | None,
    ) -> None:
        from psycopg.types.json import Jsonb

        info = self._need(name)
        sets: list[str] = []
        values: list[Any] = []
        if vector is not None:
            sets.append("embedding = %s")
            values.append(vector)
        if metadata is not None:  # the partition's keys stay as written
            kept = ", ".join(f"'{k}', metadata -> '{k}'" for k in PARTITION_KEYS)
            sets.append(f"metadata = %s::jsonb || jsonb_strip_nulls(jsonb_build_object({kept}))")
            values.append(Jsonb(metadata))
        where, params = self._where(target, partition)
        self._run(
            name, f"UPDATE {info.table} SET {', '.join(sets)} WHERE {where}", [*values, *params]
        )

    def _delete(
        self, name: str, target: list[str] | Node | None, partition: Partition | None
    ) -> None:
        info = self._need(name)
        where, params = self._where(target, partition)
        self._run(name, f"DELETE FROM {info.table} WHERE {where}", params)

    def _delete_index(self, name: str) -> None:
        info = self._need(name)
        with self.db.cursor(transaction=True) as cur:
            cur.execute(f"DROP TABLE IF EXISTS {info.table}")
            cur.execute(f"DELETE FROM {CATALOG} WHERE name = %s", (name,))
        self._infos.pop(name, None)

    # ---- reads ----------------------------------------------------------------------

    def _describe_index(self, name: str) -> IndexStats:
        info = self._need(name)
        (count,) = self._run(name, f"SELECT count(*) FROM {info.table}")[0]
        return IndexStats(dimension=info.dimension, count=count, metric=info.metric)

    def _list_indexes(self) -> list[str]:
        return [r[0] for r in self.db.query(f"SELECT name FROM {CATALOG}")]

    def _get(self, name: str, ids: list[str]) -> list[StoredVector]:
        info = self._need(name)
        rows = self._run(
            name, f"SELECT id, embedding, metadata FROM {info.table} WHERE id = ANY(%s)", [ids]
        )
        return [StoredVector(id=i, vector=v.to_list(), metadata=m) for i, v, m in rows]

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
        info = self._need(name)
        where, params = self._where(filter, partition)
        search = _Search(
            name=name,
            info=info,
            fields="id, metadata" + (", embedding" if include_vector else ""),
            op=OPERATORS[info.metric][0],
            where=where,
            params=[vector, *params],
            top_k=top_k,
        )
        rows: list[tuple[Any, ...]] | None = None
        if self.search != "exact" and self._ann_ready(info):
            if filter is not None or partition is not None:
                rows = self._selective(search)
            if rows is None:
                rows = self._approximate(search)
        if rows is None:
            rows = self._exact(search)
        return ranked(
            (
                (
                    from_distance(float(row[-1]), info.metric),
                    row[0],
                    row[1],
                    row[2].to_list() if include_vector else None,
                )
                for row in rows
            ),
            top_k,
            min_score,
        )

    def _exact(self, s: _Search) -> list[tuple[Any, ...]]:
        """Every matching row scored: the true top_k, ties ordered by id."""
        # OFFSET 0 keeps the planner from using the ANN index
        return self._run(
            s.name,
            f"SELECT {s.fields}, d FROM (SELECT {s.fields}, embedding {s.op} %s AS d "
            f"FROM {s.info.table} WHERE {s.where} OFFSET 0) q ORDER BY d, id LIMIT {int(s.top_k)}",
            s.params,
        )

    def _ann_ready(self, info: _Info) -> bool:
        if info.config.type == "hnsw":
            return True
        return info.config.type == "ivfflat" and self._has_ann(info)

    def _selective(self, s: _Search) -> list[tuple[Any, ...]] | None:
        """Exact top_k when the filter matches at most `exact_below` rows, else None.

        One statement: up to `exact_below + 1` matching rows are fetched through
        the metadata index (the OFFSET 0 fence keeps the LIMIT from tempting the
        planner into a sequential scan), counted, and scored exactly.
        """
        vector, *rest = s.params
        # limits are our own ints, written as literals: psycopg prepares repeated
        # statements, and a generic plan that cannot see the LIMIT scans the table
        rows = self._run(
            s.name,
            f"WITH c AS MATERIALIZED (SELECT * FROM (SELECT id, metadata, embedding "
            f"FROM {s.info.table} WHERE {s.where} OFFSET 0) f "
            f"LIMIT {int(self.exact_below) + 1}) "
            f"SELECT {s.fields}, d, (SELECT count(*) FROM c) FROM "
            f"(SELECT {s.fields}, embedding {s.op} %s AS d FROM c) q "
            f"ORDER BY d, id LIMIT {int(s.top_k)}",
            [*rest, vector],
        )
        if rows and rows[0][-1] > self.exact_below:
            return None
        return [row[:-1] for row in rows]

    def _approximate(self, s: _Search) -> list[tuple[Any, ...]] | None:
        """The ANN index; with a filter, an iterative scan, so that filters fill top_k.

        Rows past top_k while they tie with the last (`past_ties`), so that ties
        at the cut are ordered by id like everywhere else once the caller sorts.
        None when HNSW would need more than `hnsw.ef_search`'s largest value
        (a large top_k, or ties past it): the caller then scans exactly.
        """
        most = PGVECTOR_MAX_EF_SEARCH if s.info.config.type == "hnsw" else None
        hits = past_ties(lambda n: self._nearest(s, n), s.top_k, lambda row: float(row[-1]), most)
        return None if hits is None else list(hits)

    def _nearest(self, s: _Search, fetch: int) -> list[tuple[Any, ...]]:
        sql = (
            f"SELECT {s.fields}, embedding {s.op} %s AS d FROM {s.info.table} "
            f"WHERE {s.where} ORDER BY d LIMIT {int(fetch)}"
        )
        # per-query settings only: session settings on pooled connections cost
        # about 0.1 ms on every query, measured
        prefix = "hnsw" if s.info.config.type == "hnsw" else "ivfflat"
        settings = []
        if s.where != "TRUE":  # a filter: keep scanning the index until enough rows match
            settings.append(f"SET LOCAL {prefix}.iterative_scan = relaxed_order")
        if prefix == "hnsw" and max(self.ef_search, fetch) != PGVECTOR_EF_SEARCH:
            settings.append(f"SET LOCAL hnsw.ef_search = {int(max(self.ef_search, fetch))}")
        if prefix == "ivfflat":
            settings.append(f"SET LOCAL ivfflat.probes = {int(self.probes)}")
        if not settings:
            return self._run(s.name, sql, s.params)
        try:
            with self.db.cursor(transaction=True) as cur:
                for statement in settings:
                    cur.execute(statement)
                cur.execute(sql, s.params)
                rows: list[tuple[Any, ...]] = cur.fetchall()
                return rows
        except BackendError as exc:
            if "does not exist" in str(exc):
                raise IndexNotFoundError(s.name) from exc
            raise
