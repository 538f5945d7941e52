"""One libSQL connection: URL parsing, a lock, transactions and schema versions."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recallstack.core.errors import BackendError, InvalidInputError, refuse_newer
from recallstack.core.urls import endpoint, redact, scrub

Migration = Callable[["Database"], None]


@dataclass(frozen=True)
class Location:
    """Where a `libsql:` URL points: a local file, `:memory:`, or a remote primary."""

    path: str
    remote: str | None = None
    token: str | None = None
    """A remote primary's auth token: `?authToken=` or $TURSO_AUTH_TOKEN."""


def parse_url(url: str) -> Location:
    """`libsql:///rel.db`, `libsql:////abs.db`, `libsql://:memory:`, and a remote primary
    `libsql://host[:port][?authToken=...]` (Turso, sqld)."""
    if not url.startswith("libsql://"):
        raise InvalidInputError(f"not a libsql URL: {redact(url)!r}")
    rest = url[len("libsql://") :]
    if rest == ":memory:":
        return Location(":memory:")
    if rest.startswith("/"):
        path = rest[1:]
        if not path:
            raise InvalidInputError(f"{redact(url)!r} names no database file")
        return Location(path)
    if not rest:
        raise InvalidInputError(f"{redact(url)!r} names no database")
    server = endpoint(url)
    port = "" if server.port is None else f":{server.port}"
    token = server.secret("authToken", "TURSO_AUTH_TOKEN")
    return Location(path="", remote=f"libsql://{server.host}{port}", token=token)


class _Connection:
    """One libSQL connection and the lock that gives it to one thread at a time."""

    def __init__(self, conn: Any, file: tuple[int, int] | None) -> None:
        self.conn = conn
        self.file = file
        self.lock = threading.RLock()
        self.in_tx = False
        self.users = 1


MMAP_SIZE = 256 * 2**20
"""Bytes of the database file read through a memory map rather than read calls: a
recall reads a hundred scattered rows (a hybrid recall's candidates) in a third of
the time. Mapped pages are the operating system's file cache, shared by processes."""

_OPEN: dict[tuple[str, str | None], _Connection] = {}
"""Connections to database files, shared by every store of the process that opens one,
and kept open when the last of them closes (see `Database.close`)."""
_OPEN_LOCK = threading.Lock()


def _file(path: str) -> tuple[int, int] | None:
    """The (device, inode) of a database file: a connection kept open is reused only
    for the same file, not for a new one created at the same path."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _keep_for_life(conn: Any) -> None:
    """Never close `conn`, not even when the interpreter exits and frees what modules
    hold: libsql 0.1.11 can crash (SIGSEGV) inside `Connection.close()` on a file whose
    writer was killed (seen in `bench/reliability.py`). The operating system releases
    the file at exit, and the next connection recovers the write-ahead log as usual."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))


class Database:
    """A libSQL connection shared by the threads of a process, one statement at a time.

    Every store of a process that opens the same file (a memory's storage and
    vector store, several memories) shares one connection: two connections
    of one process would wait on each other's write lock while holding the
    GIL. A remote URL opens an embedded replica (`replica=` local file) that
    syncs with the primary after every write.
    """

    def __init__(
        self,
        url: str,
        *,
        auth_token: str | None = None,
        replica: str | None = None,
        busy_timeout_ms: int = 10_000,
    ) -> None:
        self.location = parse_url(url)
        if self.location.remote is not None and replica is None:
            raise InvalidInputError(
                f"{redact(url)}: a remote database needs replica='local-file.db' "
                "(an embedded replica that syncs with the primary)"
            )
        key = (
            self.location.remote or str(Path(self.location.path).resolve()),
            replica and str(Path(replica).resolve()),
        )
        self._key = None if self.location.path == ":memory:" else key
        with _OPEN_LOCK:  # the file looked at under the lock: another thread may create it
            file = _file(self.location.path) if self.location.remote is None else None
            shared = _OPEN.get(key) if self._key else None
            if shared is not None and shared.file == file:
                shared.users += 1
            else:
                conn = self._connect(url, auth_token, replica, busy_timeout_ms)
                if self.location.remote is None and self.location.path != ":memory:":
                    file = _file(self.location.path)
                shared = _Connection(conn, file)
                if self._key:
                    _keep_for_life(conn)
                    _OPEN[key] = shared
        self._shared = shared
        self._closed = False
        self._conn = shared.conn
        self._lock = shared.lock

    def _connect(
        self, url: str, auth_token: str | None, replica: str | None, busy_timeout_ms: int
    ) -> Any:
        import libsql

        try:
            if self.location.remote is None:
                if self.location.path != ":memory:":
                    Path(self.location.path).parent.mkdir(parents=True, exist_ok=True)
                conn = libsql.connect(self.location.path)
            else:
                token = auth_token or self.location.token or ""
                conn = libsql.connect(replica, sync_url=self.location.remote, auth_token=token)
                conn.sync()
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if self.location.path not in ("", ":memory:"):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")
        except Exception as exc:
            raise BackendError(
                f"libsql: cannot open {redact(url)}: {scrub(str(exc), url)}"
            ) from exc
        return conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                rows: list[tuple[Any, ...]] = self._conn.execute(sql, tuple(params)).fetchall()
            except Exception as exc:
                raise BackendError(f"libsql: {exc}") from exc
            self._autocommit()
            return rows

    def changes(self) -> tuple[int, int] | None:
        """A stamp that moves whenever the file changes: SQLite's `data_version`
        (commits by other connections) and this connection's `total_changes()` (its
        own writes, every store of the process sharing it). None for a remote
        database: its replica syncs outside SQLite's view."""
        if self.location.remote is not None:
            return None
        ((version, changes),) = self.query(
            "SELECT (SELECT data_version FROM pragma_data_version), total_changes()"
        )
        return version, changes

    def _autocommit(self) -> None:
        """Outside `transaction()`, every statement commits on its own."""
        if self._conn.in_transaction and not self._shared.in_tx:
            self._call(self._conn.commit)

    @staticmethod
    def _call(step: Callable[[], Any]) -> Any:
        try:
            return step()
        except Exception as exc:
            raise BackendError(f"libsql: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """All statements inside commit together or not at all.

        A lock another process holds past `busy_timeout_ms` is a `BackendError`.
        """
        with self._lock:
            if self._shared.in_tx:
                yield self
                return
            self._call(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            self._shared.in_tx = True
            try:
                yield self
                self._call(self._conn.commit)
            except BaseException:
                self._conn.rollback()
                raise
            finally:
                self._shared.in_tx = False
            if self.location.remote is not None:
                self._call(self._conn.sync)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._lock:
            try:
                self._conn.executemany(sql, [tuple(r) for r in rows])
            except Exception as exc:
                raise BackendError(f"libsql: {exc}") from exc
            self._autocommit()

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Bring `component`'s schema to the newest version; returns that version.

        Versions are kept in `recallstack_schema`; migration k (from 1) runs
        once, in a transaction, when the stored version is below k. When it
        fails (a schema newer than this code, say) the connection is closed:
        the store that opened it is not built.
        """
        try:
            return self._migrate(component, migrations)
        except BaseException:
            self.close()
            raise

    def _migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        with self.transaction():
            self.query(
                "CREATE TABLE IF NOT EXISTS recallstack_schema "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            rows = self.query(
                "SELECT version FROM recallstack_schema WHERE component = ?", (component,)
            )
            current = rows[0][0] if rows else 0
            refuse_newer(component, current, len(migrations))
            for version, migration in enumerate(migrations, start=1):
                if version > current:
                    migration(self)
            self.query(
                "INSERT INTO recallstack_schema VALUES (?, ?) "
                "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                (component, len(migrations)),
            )
        return len(migrations)

    def close(self) -> None:
        """Release this store's use of the connection.

        A connection to a file stays open for the life of the process, idle once
        its last store closes, and the next store of the same file reuses it: see
        `_keep_for_life`. Only `:memory:` connections are closed here."""
        with _OPEN_LOCK, self._lock:
            if self._closed:
                return
            self._closed = True
            self._shared.users -= 1
            if self._shared.users == 0 and self._key is None:
                self._conn.close()
