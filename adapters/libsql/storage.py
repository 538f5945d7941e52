"""LibSQL storage: threads, messages and resources in three indexed tables."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from recallstack.adapters.libsql.database import Database
from recallstack.core.messages import Message
from recallstack.core.records import Include, Resource, Thread
from recallstack.core.storage import Order, Storage, ThreadOrderBy

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MESSAGE_COLUMNS = "id, thread_id, resource_id, role, content, created_at, metadata"
UNINDEXED = (
    "FROM recallstack_messages m WHERE NOT EXISTS (SELECT 1 FROM recallstack_message_index x "
    "WHERE x.index_name = ? AND x.message_id = m.id)"
)
"""The messages with no ledger record under one index name (the parameter)."""


def to_us(value: datetime) -> int:
    """Datetimes are stored as UTC epoch microseconds: exact, and ordered as numbers."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def _v1(db: Database) -> None:
    db.query(
        "CREATE TABLE recallstack_resources (id TEXT PRIMARY KEY, metadata TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)"
    )
    db.query(
        "CREATE TABLE recallstack_threads (id TEXT PRIMARY KEY, resource_id TEXT NOT NULL, "
        "title TEXT, metadata TEXT NOT NULL, created_at INTEGER NOT NULL, "
        "updated_at INTEGER NOT NULL)"
    )
    db.query(
        "CREATE TABLE recallstack_messages (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
        "resource_id TEXT, role TEXT NOT NULL, content TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, metadata TEXT)"
    )
    db.query(
        "CREATE INDEX recallstack_messages_thread "
        "ON recallstack_messages (thread_id, created_at, id)"
    )


def _v2(db: Database) -> None:
    """Index-backed listing of a resource's threads and messages."""
    db.query(
        "CREATE INDEX recallstack_threads_resource "
        "ON recallstack_threads (resource_id, created_at, id)"
    )
    db.query("CREATE INDEX recallstack_messages_resource ON recallstack_messages (resource_id)")


def _v3(db: Database) -> None:
    """The index ledger: which messages are embedded under which index."""
    db.query(
        "CREATE TABLE recallstack_message_index (message_id TEXT NOT NULL, "
        "index_name TEXT NOT NULL, PRIMARY KEY (message_id, index_name)) WITHOUT ROWID"
    )
    db.query(
        "CREATE INDEX recallstack_message_index_name "
        "ON recallstack_message_index (index_name, message_id)"
    )


MIGRATIONS = [_v1, _v2, _v3]


def _thread(row: tuple[Any, ...]) -> Thread:
    return Thread(
        id=row[0],
        resource_id=row[1],
        title=row[2],
        metadata=json.loads(row[3]),
        created_at=from_us(row[4]),
        updated_at=from_us(row[5]),
    )


def _message(row: tuple[Any, ...]) -> Message:
    return Message(
        id=row[0],
        thread_id=row[1],
        resource_id=row[2],
        role=row[3],
        content=json.loads(row[4]),
        created_at=from_us(row[5]),
        metadata=None if row[6] is None else json.loads(row[6]),
    )


class LibSQLStorage(Storage):
    backend = "libsql"

    def __init__(self, url: str = "libsql:///local.db", **options: Any) -> None:
        self.db = Database(url, **options)
        self.db.migrate("storage", MIGRATIONS)

    def close(self) -> None:
        self.db.close()

    # ---- resources ------------------------------------------------------------

    def _get_resource(self, resource_id: str) -> Resource | None:
        rows = self.db.query(
            "SELECT id, metadata, created_at, updated_at FROM recallstack_resources WHERE id = ?",
            (resource_id,),
        )
        if not rows:
            return None
        id_, metadata, created, updated = rows[0]
        return Resource(
            id=id_,
            metadata=json.loads(metadata),
            created_at=from_us(created),
            updated_at=from_us(updated),
        )

    def _save_resource(self, resource: Resource) -> Resource:
        self.db.query(
            "INSERT OR REPLACE INTO recallstack_resources VALUES (?, ?, ?, ?)",
            (
                resource.id,
                json.dumps(resource.metadata),
                to_us(resource.created_at),
                to_us(resource.updated_at),
            ),
        )
        return resource

    # ---- threads --------------------------------------------------------------

    def _save_thread(self, thread: Thread) -> Thread:
        self.db.query(
            "INSERT OR REPLACE INTO recallstack_threads VALUES (?, ?, ?, ?, ?, ?)",
            (
                thread.id,
                thread.resource_id,
                thread.title,
                json.dumps(thread.metadata),
                to_us(thread.created_at),
                to_us(thread.updated_at),
            ),
        )
        return thread

    def _get_thread(self, thread_id: str) -> Thread | None:
        rows = self.db.query("SELECT * FROM recallstack_threads WHERE id = ?", (thread_id,))
        return _thread(rows[0]) if rows else None

    def _delete_thread(self, thread_id: str) -> None:
        with self.db.transaction():
            self.db.query(
                "DELETE FROM recallstack_message_index WHERE message_id IN "
                "(SELECT id FROM recallstack_messages WHERE thread_id = ?)",
                (thread_id,),
            )
            self.db.query("DELETE FROM recallstack_messages WHERE thread_id = ?", (thread_id,))
            self.db.query("DELETE FROM recallstack_threads WHERE id = ?", (thread_id,))

    def _list_threads(
        self,
        resource_id: str,
        order_by: ThreadOrderBy,
        order: Order,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Thread], int]:
        direction = "DESC" if order == "desc" else "ASC"
        rows = self.db.query(
            f"SELECT * FROM recallstack_threads WHERE resource_id = ? "
            f"ORDER BY {order_by} {direction}, id {direction} LIMIT ? OFFSET ?",
            (resource_id, -1 if limit is None else limit, offset),
        )
        (total,) = self.db.query(
            "SELECT count(*) FROM recallstack_threads WHERE resource_id = ?", (resource_id,)
        )[0]
        return [_thread(r) for r in rows], total

    # ---- messages -------------------------------------------------------------

    def _save_messages(self, messages: list[Message]) -> None:
        rows = [
            (
                m.id,
                m.thread_id,
                m.resource_id,
                m.role,
                json.dumps(m.model_dump(mode="json")["content"]),
                to_us(m.created_at),
                None if m.metadata is None else json.dumps(m.metadata),
            )
            for m in messages
        ]
        with self.db.transaction():
            self.db.executemany(
                f"INSERT OR REPLACE INTO recallstack_messages ({MESSAGE_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._forget([m.id for m in messages])

    def _forget(self, ids: list[str]) -> None:
        self.db.query(
            "DELETE FROM recallstack_message_index "
            "WHERE message_id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        )

    def _get_messages(self, ids: list[str]) -> list[Message]:
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS} FROM recallstack_messages "
            "WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        )
        return [_message(r) for r in rows]

    def _list_messages(
        self,
        thread_id: str,
        resource_id: str | None,
        order: Order,
        start: datetime | None,
        end: datetime | None,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Message], int]:
        where = ["thread_id = ?"]
        params: list[Any] = [thread_id]
        if resource_id is not None:
            where.append("resource_id = ?")
            params.append(resource_id)
        if start is not None:
            where.append("created_at >= ?")
            params.append(to_us(start))
        if end is not None:
            where.append("created_at <= ?")
            params.append(to_us(end))
        condition = " AND ".join(where)
        (total,) = self.db.query(
            f"SELECT count(*) FROM recallstack_messages WHERE {condition}", params
        )[0]
        if limit == 0:
            return [], total
        direction = "DESC" if order == "desc" else "ASC"
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS} FROM recallstack_messages WHERE {condition} "
            f"ORDER BY created_at {direction}, id {direction} LIMIT ? OFFSET ?",
            [*params, -1 if limit is None else limit, offset],
        )
        return [_message(r) for r in rows], total

    def _include_windows(self, include: list[Include], resource_id: str | None) -> list[Message]:
        """Every include window in one statement of constant size, whatever the count.

        The targets arrive as one JSON array. Two recursive walks step from each
        target to its previous and next message in its own thread, one index
        seek on (thread_id, created_at, id) a step, `before` and `after` steps
        deep. No window functions, no UNION that grows with the targets.
        """
        steps = [
            f"""{name}(r, n) AS (
                SELECT r, {count} FROM targets
                UNION ALL
                SELECT (SELECT p.rowid FROM recallstack_messages p
                        WHERE p.thread_id = c.thread_id
                        AND (p.created_at, p.id) {compare} (c.created_at, c.id)
                        ORDER BY p.created_at {direction}, p.id {direction} LIMIT 1), n - 1
                FROM {name} JOIN recallstack_messages c ON c.rowid = {name}.r WHERE n > 0)"""
            for name, count, compare, direction in (
                ("earlier", "before", "<", "DESC"),
                ("later", "after", ">", "ASC"),
            )
        ]
        # the caller's resource bounds the targets and every neighbour alike
        scoped = resource_id is not None
        rows = self.db.query(
            f"""WITH RECURSIVE targets(r, before, after) AS (
                SELECT t.rowid, j.value ->> '$[1]', j.value ->> '$[2]'
                FROM json_each(?) j JOIN recallstack_messages t ON t.id = j.value ->> '$[0]'
                WHERE {"t.resource_id = ? AND " if scoped else ""}1),
            {", ".join(steps)}
            SELECT {MESSAGE_COLUMNS} FROM recallstack_messages
            WHERE {"resource_id = ? AND " if scoped else ""}rowid IN
                (SELECT r FROM earlier UNION SELECT r FROM later)""",
            [
                json.dumps([[i.id, i.before, i.after] for i in include]),
                *([resource_id, resource_id] if scoped else []),
            ],
        )
        return [_message(r) for r in rows]

    def _delete_messages(self, ids: list[str]) -> None:
        with self.db.transaction():
            self.db.query(
                "DELETE FROM recallstack_messages WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
            self._forget(ids)

    # ---- the index ledger ---------------------------------------------------------

    def _mark_indexed(self, message_ids: list[str], index_name: str) -> None:
        self.db.executemany(
            "INSERT OR IGNORE INTO recallstack_message_index VALUES (?, ?)",
            [(i, index_name) for i in message_ids],
        )

    def _forget_indexed(self, message_ids: list[str], thread_id: str | None) -> None:
        with self.db.transaction():
            if message_ids:
                self._forget(message_ids)
            if thread_id is not None:
                self.db.query(
                    "DELETE FROM recallstack_message_index WHERE message_id IN "
                    "(SELECT id FROM recallstack_messages WHERE thread_id = ?)",
                    (thread_id,),
                )

    def _unindexed(
        self, index_name: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[Message]:
        cursor = (-1, "") if after is None else (to_us(after[0]), after[1])
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS} {UNINDEXED} AND (created_at, id) > (?, ?) "
            "ORDER BY created_at, id LIMIT ?",
            (index_name, *cursor, limit),
        )
        return [_message(r) for r in rows]

    def _count_unindexed(self, index_name: str) -> int:
        ((count,),) = self.db.query(f"SELECT count(*) {UNINDEXED}", (index_name,))
        return int(count)

    def _index_names(self) -> list[str]:
        rows = self.db.query("SELECT DISTINCT index_name FROM recallstack_message_index")
        return [r[0] for r in rows]
