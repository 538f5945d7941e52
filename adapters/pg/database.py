"""A psycopg connection pool with pgvector registered, and schema versions."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from recallstack.core.errors import BackendError, refuse_newer
from recallstack.core.urls import scrub

if TYPE_CHECKING:
    from psycopg.abc import Buffer
    from psycopg.adapt import Loader

Migration = Callable[[Any], None]
"""A migration runs statements on the cursor it is given, inside a transaction."""
ANALYZE_FROM = 1_000
"""Rows written to a table (and a tenth of it) after which this process runs ANALYZE."""

JSONB_OID = 3802
"""jsonb's type oid, the same in every Postgres."""
_scan_json = json.JSONDecoder().raw_decode


@functools.cache
def jsonb_loader() -> type[Loader]:
    """The loader recallstack's cursors decode jsonb with (psycopg imported on first use)."""
    from psycopg.adapt import Loader

    class JsonbLoader(Loader):
        """jsonb text straight into the stdlib's C JSON scanner.

        psycopg's default calls `json.loads` on bytes, which sniffs the encoding
        first and looks for trailing text after: about 1.5 µs a value, and every
        metadata and message row has one. Postgres sends one UTF-8 document with
        nothing around it, so neither step can find anything; the values are
        the ones `json.loads` gives, from the same decoder.
        """

        def load(self, data: Buffer) -> Any:
            return _scan_json(str(data, "utf-8"))[0]

    return JsonbLoader


class Database:
    """Connections from a pool (yours, or one made from the URL) with pgvector ready."""

    def __init__(
        self,
        url: str,
        *,
        pool: Any = None,
        min_size: int = 1,
        max_size: int = 8,
        vector: bool = True,
    ) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        if vector:
            _ensure_extension(url)
        self.owns_pool = pool is None
        if pool is None:
            configure = _register_vector if vector else None
            pool = ConnectionPool(
                url.replace("postgres://", "postgresql://", 1),
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                configure=configure,
                open=True,
            )
        self.pool = pool
        self.errors = (psycopg.Error,)
        self.tuples_ok = psycopg.pq.ExecStatus.TUPLES_OK
        self._written: dict[str, int] = {}
        """Rows written to each table by this process since it last analyzed it..."""
        self._sizes: dict[str, float] = {}
        """...and the table's row count then, from the statistics."""
        self._stats_lock = threading.Lock()

    def _cursor(self, conn: Any) -> Any:
        """A cursor of `conn` with recallstack's jsonb loader, set on the cursor only:
        a pool the caller passed keeps its connections as they were."""
        cur = conn.cursor()
        cur.adapters.register_loader(JSONB_OID, jsonb_loader())
        return cur

    @contextmanager
    def cursor(self, transaction: bool = False) -> Iterator[Any]:
        """A cursor; with `transaction=True` everything in the block commits together."""
        try:
            with self.pool.connection() as conn:
                if transaction:
                    with conn.transaction(), self._cursor(conn) as cur:
                        yield cur
                else:
                    with self._cursor(conn) as cur:
                        yield cur
        except self.errors as exc:
            raise BackendError(f"postgres: {exc}") from exc

    def query(self, sql: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """One statement's rows.

        The hot path of every read: `getconn`/`putconn` rather than
        `pool.connection()`, whose two context managers cost about 25 µs a query
        here (measured, bench/pg_vectors.py). `putconn` rolls back whatever a
        failed statement left open, as `pool.connection()` would. Whether there
        are rows is read from the result's status: `cursor.description` builds
        a column object per field on every call (3 µs for three columns).
        """
        try:
            conn = self.pool.getconn()  # a pool that cannot connect raises PoolTimeout here
            try:
                cur = self._cursor(conn).execute(sql, params)
                returned = cur.pgresult.status == self.tuples_ok
                rows: list[tuple[Any, ...]] = cur.fetchall() if returned else []
                if not conn.autocommit:
                    conn.commit()
                return rows
            finally:
                self.pool.putconn(conn)
        except self.errors as exc:
            raise BackendError(f"postgres: {exc}") from exc

    def wrote(self, tables: Sequence[str], rows: int) -> None:
        """Note `rows` written to each table; ANALYZE a table once this process has
        written a tenth of it (and at least ANALYZE_FROM rows) since.

        Autovacuum refreshes statistics only later (a minute or more, or never on
        a server where it is off), and until then a bulk-loaded table is planned
        as if it were small: a resource-scoped recall at 100,000 messages took
        15 to 67 ms right after the load and 5 ms after ANALYZE (bench/recall_latency.py).
        """
        for table in tables:
            with self._stats_lock:
                written = self._written.get(table, 0) + rows
                self._written[table] = written
                size = self._sizes.get(table)
            if written < ANALYZE_FROM:
                continue
            if size is None:  # first time past ANALYZE_FROM: what the statistics say now
                size = self._planned_rows(table)
                with self._stats_lock:
                    self._sizes[table] = size
            if written < size / 10:
                continue
            self.query(f"ANALYZE {table}")
            size = self._planned_rows(table)
            with self._stats_lock:
                self._written[table] = 0
                self._sizes[table] = size

    def _planned_rows(self, table: str) -> float:
        """The table's row count in the planner's statistics (-1: never analyzed)."""
        found = self.query("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (table,))
        return float(found[0][0]) if found and found[0][0] is not None else -1.0

    def migrate(self, component: str, migrations: Sequence[Migration]) -> None:
        """Run the migrations `component` has not had yet, under an advisory lock. When
        it fails (a schema newer than this code, say) the pool is closed: the store
        that opened it is not built."""
        try:
            self._migrate(component, migrations)
        except BaseException:
            self.close()
            raise

    def _migrate(self, component: str, migrations: Sequence[Migration]) -> None:
        with self.cursor(transaction=True) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('recallstack_schema'))")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS recallstack_schema "
                "(component text PRIMARY KEY, version integer NOT NULL)"
            )
            cur.execute("SELECT version FROM recallstack_schema WHERE component = %s", (component,))
            row = cur.fetchone()
            current = row[0] if row else 0
            refuse_newer(component, current, len(migrations))
            for version, migration in enumerate(migrations, start=1):
                if version > current:
                    migration(cur)
            cur.execute(
                "INSERT INTO recallstack_schema VALUES (%s, %s) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (component, len(migrations)),
            )

    def close(self) -> None:
        """Close the pool made from the URL; a pool the caller passed stays theirs."""
        if self.owns_pool:
            self.pool.close()


def _ensure_extension(url: str) -> None:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            installed = conn.execute(
                "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            if installed is None:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        raise BackendError(
            "postgres: the pgvector extension is not installed and could not be created "
            f"({scrub(str(exc), url)}); install pgvector on the server or ask an "
            "administrator to run CREATE EXTENSION vector"
        ) from exc


def _register_vector(conn: Any) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
