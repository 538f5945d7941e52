"""A psycopg connection pool with pgvector registered, and schema versions.

The adapters' statements go through one seam (core/runtime/awaiting.py `Seam`):
`Pool`, psycopg's blocking pool, and on the event loop (`AsyncMemory`)
`AwaitingPool`, an `AsyncConnectionPool` whose coroutines are awaited with
`await_only`; both have `query` and `cursor`, so that the adapters' code is
written once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from recallstack.core.errors import BackendError, InvalidInputError, refuse_newer
from recallstack.core.runtime.awaiting import Seam, await_only, await_whole, entered
from recallstack.core.urls import redact, scrub

if TYPE_CHECKING:
    from psycopg.abc import Buffer
    from psycopg.adapt import Loader

Migration = Callable[[Any], None]
"""A migration runs statements on the cursor it is given, inside a transaction."""
ANALYZE_FROM = 1_000
"""Rows written to a table (and a tenth of it) after which this process runs ANALYZE."""

CONNECT_TIMEOUT = 5
"""Seconds a connection may take to open, unless the URL sets `connect_timeout`."""
POOL_TIMEOUT = 30.0
"""Seconds a call waits for a pooled connection (psycopg_pool's default)."""
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
        from psycopg_pool import ConnectionPool

        self.url = url.replace("postgres://", "postgresql://", 1)
        self.connect_options = connect_options(self.url)
        _probe(self.url, self.connect_options, vector)  # unreachable: one error, now
        self.owns_pool = pool is None
        self.sizes = (min_size, max_size)
        self.vector = vector
        if pool is None:
            configure = _register_vector if vector else None
            pool = ConnectionPool(
                self.url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True, **self.connect_options},
                configure=configure,
                open=True,
            )
        self.pool = pool
        self.seam: Seam[Connections] = Seam(Pool(pool), self._open_async_pool, AwaitingPool.close)
        """The blocking pool, or on each running loop its asyncio pool."""
        self._written: dict[str, int] = {}
        """Rows written to each table by this process since it last analyzed it..."""
        self._sizes: dict[str, float] = {}
        """...and the table's row count then, from the statistics."""
        self._stats_lock = threading.Lock()

    def cursor(self, transaction: bool = False) -> AbstractContextManager[Any]:
        """A cursor; with `transaction=True` everything in the block commits together."""
        return self.seam.current().cursor(transaction)

    def query(self, sql: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """One statement's rows."""
        return self.seam.current().query(sql, params)

    async def _open_async_pool(self) -> AwaitingPool:
        """An asyncio pool, once a first connection shows the server answers (a server
        gone since the store was built: one error, rather than the pool's retries)."""
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        try:
            probe = await psycopg.AsyncConnection.connect(self.url, **self.connect_options)
        except psycopg.Error as exc:
            raise unreachable(self.url, exc) from None
        await probe.close()
        pool = AsyncConnectionPool(
            self.url,
            min_size=self.sizes[0],
            max_size=self.sizes[1],
            kwargs={"autocommit": True, **self.connect_options},
            configure=_register_vector_async if self.vector else None,
            open=False,
        )
        try:  # its first connections made now: growing it meanwhile would race the first calls
            await pool.open(wait=True, timeout=POOL_TIMEOUT)
        except BaseException:
            await pool.close()
            raise
        return AwaitingPool(pool)

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
        """Close the pool made from the URL (a pool the caller passed stays theirs), and
        each loop's asyncio pool, on its loop (`Seam.close`)."""
        self.seam.close()
        if self.owns_pool:
            self.pool.close()


def connect_options(url: str) -> dict[str, Any]:
    """The options every connection is opened with: a 5 s connect timeout unless the
    URL sets `connect_timeout`. A URL libpq cannot parse is refused here, its secrets
    hidden (libpq's message quotes the password)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise InvalidInputError(f"postgres: {redact(url)}: {scrub(str(exc), url)}") from None
    if "connect_timeout" not in given:
        return {"connect_timeout": CONNECT_TIMEOUT}
    try:
        seconds = int(str(given["connect_timeout"]))
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise InvalidInputError(
            f"postgres: {redact(url)}: connect_timeout must be a whole number of seconds, "
            f"at least 1 (got {given['connect_timeout']!r})"
        )
    return {}


def unreachable(url: str, exc: Exception) -> BackendError:
    """A failed connection, as one error that names the server and never the secret."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(url)
    where = f"{given.get('host') or 'localhost'}:{given.get('port') or 5432}"
    first = scrub(str(exc), url).strip().splitlines()[0]
    return BackendError(f"postgres: cannot connect to {where}: {first}")


def _probe(url: str, options: dict[str, Any], vector: bool) -> None:
    """Connect once: a server that cannot be reached is one `BackendError` within the
    connect timeout. For the vector store, install pgvector when it is missing."""
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, **options)
    except psycopg.Error as exc:
        raise unreachable(url, exc) from None
    with conn:
        if not vector:
            return
        try:
            installed = conn.execute(
                "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            if installed is None:
                # another process may create it at the same instant: then it is there
                with contextlib.suppress(psycopg.errors.UniqueViolation):
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


async def _register_vector_async(conn: Any) -> None:
    from pgvector.psycopg import register_vector_async

    await register_vector_async(conn)


class Connections(Protocol):
    """The seam: what the adapters' statements go through, blocking or awaited."""

    def cursor(self, transaction: bool) -> AbstractContextManager[Any]:
        """A cursor; with `transaction=True` everything in the block commits together."""
        ...

    def query(self, sql: Any, params: Sequence[Any] | dict[str, Any]) -> list[tuple[Any, ...]]:
        """One statement's rows."""
        ...


def jsonb_cursor(conn: Any) -> Any:
    """A cursor of `conn` with recallstack's jsonb loader, set on the cursor only: a pool
    the caller passed keeps its connections as they were."""
    cur = conn.cursor()
    cur.adapters.register_loader(JSONB_OID, jsonb_loader())
    return cur


class Pool:
    """The seam's blocking side: psycopg's `ConnectionPool`."""

    def __init__(self, pool: Any) -> None:
        import psycopg

        self.pool = pool
        self.tuples_ok = psycopg.pq.ExecStatus.TUPLES_OK

    @contextmanager
    def cursor(self, transaction: bool) -> Iterator[Any]:
        with failures(), self.pool.connection() as conn:
            if transaction:
                with conn.transaction(), jsonb_cursor(conn) as cur:
                    yield cur
            else:
                with jsonb_cursor(conn) as cur:
                    yield cur

    def query(self, sql: Any, params: Sequence[Any] | dict[str, Any]) -> list[tuple[Any, ...]]:
        """The hot path of every read: `getconn`/`putconn` rather than
        `pool.connection()`, whose two context managers cost about 25 µs a query
        here (measured, bench/pg_vectors.py). `putconn` rolls back whatever a
        failed statement left open, as `pool.connection()` would. Whether there
        are rows is read from the result's status: `cursor.description` builds
        a column object per field on every call (3 µs for three columns)."""
        with failures():
            conn = self.pool.getconn()  # a pool that cannot connect raises PoolTimeout here
            try:
                cur = jsonb_cursor(conn).execute(sql, params)
                returned = cur.pgresult.status == self.tuples_ok
                rows: list[tuple[Any, ...]] = cur.fetchall() if returned else []
                if not conn.autocommit:
                    conn.commit()
                return rows
            finally:
                self.pool.putconn(conn)


class AwaitingPool:
    """The seam's asyncio side: an `AsyncConnectionPool`, with `Pool`'s methods, each
    coroutine awaited with `await_only`."""

    def __init__(self, pool: Any) -> None:
        import psycopg

        self.pool = pool
        self.tuples_ok = psycopg.pq.ExecStatus.TUPLES_OK

    @contextmanager
    def cursor(self, transaction: bool) -> Iterator[AwaitingCursor]:
        with failures(), entered(self.pool.connection()) as conn:
            if transaction:  # its statements end whole, so that a rollback finds it idle
                with entered(conn.transaction(), whole=True), entered(jsonb_cursor(conn)) as cur:
                    yield AwaitingCursor(cur)
            else:
                with entered(jsonb_cursor(conn)) as cur:
                    yield AwaitingCursor(cur)

    def query(self, sql: Any, params: Sequence[Any] | dict[str, Any]) -> list[tuple[Any, ...]]:
        with failures(), entered(self.pool.connection()) as conn:
            cur = jsonb_cursor(conn)
            await_only(cur.execute(sql, params))
            returned = cur.pgresult.status == self.tuples_ok
            return await_only(cur.fetchall()) if returned else []

    async def close(self) -> None:
        await self.pool.close()


@contextmanager
def failures() -> Iterator[None]:
    """psycopg's errors, as `BackendError`."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise BackendError(f"postgres: {exc}") from exc


class AwaitingCursor:
    """A psycopg `AsyncCursor` with the blocking `Cursor` methods the adapters use,
    each awaited with `await_only`."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: Any, params: Any = None) -> AwaitingCursor:
        await_whole(self._cursor.execute(sql, params))
        return self

    def executemany(self, sql: Any, rows: Any) -> None:
        await_whole(self._cursor.executemany(sql, rows))

    def fetchall(self) -> list[tuple[Any, ...]]:
        return await_whole(self._cursor.fetchall())

    def fetchone(self) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = await_whole(self._cursor.fetchone())
        return row

    @contextmanager
    def copy(self, statement: str) -> Iterator[AwaitingCopy]:
        with entered(self._cursor.copy(statement), whole=True) as copy:
            rows = AwaitingCopy(copy)
            yield rows
            await_whole(rows.written())


class AwaitingCopy:
    """A psycopg `AsyncCopy` with the blocking `Copy` methods the adapters use. Rows
    are sent together at the block's end, in one call a cancellation waits for."""

    def __init__(self, copy: Any) -> None:
        self._copy = copy
        self._rows: list[Sequence[Any]] = []

    def set_types(self, types: Sequence[str]) -> None:
        self._copy.set_types(types)

    def write_row(self, row: Sequence[Any]) -> None:
        self._rows.append(row)

    async def written(self) -> None:
        for row in self._rows:
            await self._copy.write_row(row)
