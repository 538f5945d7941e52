"""The storage LibSQL and Postgres share, written once: resources, threads, reading
messages and the index ledger are the same SQL on both engines. A `Dialect` says how
each engine spells what differs in form (parameters, lists of ids, JSON, time); what
differs in earnest (saving messages with their words, keyword search, neighbour
windows) stays in each adapter's subclass of `SqlStorage`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from recallstack.core.contracts.storage import Order, Storage, ThreadOrderBy
from recallstack.core.messages import Message
from recallstack.core.records import Resource, Thread

MESSAGE_COLUMNS = "id, thread_id, resource_id, role, content, created_at, metadata"
THREAD_COLUMNS = "id, resource_id, title, metadata, created_at, updated_at"
RESOURCE_COLUMNS = "id, metadata, created_at, updated_at"

UNINDEXED = (
    "FROM recallstack_messages m WHERE NOT EXISTS (SELECT 1 FROM recallstack_message_index x "
    "WHERE x.index_name = ? AND x.message_id = m.id)"
)
"""The messages with no ledger record under one index name (the parameter)."""

INDEX_NAMES = """
WITH RECURSIVE n(name) AS (
    SELECT min(index_name) FROM recallstack_message_index
    UNION ALL
    SELECT (SELECT min(index_name) FROM recallstack_message_index WHERE index_name > n.name)
    FROM n WHERE n.name IS NOT NULL
)
SELECT name FROM n WHERE name IS NOT NULL
"""
"""The ledger's distinct index names, by a skip scan of its (index_name, ...) index:
one probe per name, where DISTINCT reads every record (36 ms at a million)."""


class Database(Protocol):
    """What the shared SQL needs of a connection: one statement's rows."""

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Dialect:
    """How one engine spells the shared SQL's parameters and values."""

    placeholder: str
    """A parameter: `?` or `%s`. The shared SQL is written with `?`."""
    ids: str
    """A table of one `value` column, the ids of one parameter (`ids_value` makes it)."""
    ids_value: Callable[[list[str]], Any]
    no_limit: int | None
    """What LIMIT takes to mean no limit."""
    unindexed: str
    """Put before a column to keep its index out of the plan, where the engine has a way."""
    json_value: Callable[[Any], Any]
    read_json: Callable[[Any], Any]
    time_value: Callable[[datetime], Any] = _same
    read_time: Callable[[Any], datetime] = _same

    def sql(self, template: str) -> str:
        """The shared SQL in this engine's spelling: `?` as its placeholder, `{ids}` as
        its table of ids."""
        return _spelled(template, self.placeholder, self.ids)

    def resource(self, row: tuple[Any, ...]) -> Resource:
        id_, metadata, created, updated = row
        return Resource(
            id=id_,
            metadata=self.read_json(metadata),
            created_at=self.read_time(created),
            updated_at=self.read_time(updated),
        )

    def thread(self, row: tuple[Any, ...]) -> Thread:
        id_, resource, title, metadata, created, updated = row
        return Thread(
            id=id_,
            resource_id=resource,
            title=title,
            metadata=self.read_json(metadata),
            created_at=self.read_time(created),
            updated_at=self.read_time(updated),
        )

    def message(self, row: tuple[Any, ...]) -> Message:
        id_, thread, resource, role, content, created, metadata = row
        return Message(
            id=id_,
            thread_id=thread,
            resource_id=resource,
            role=role,
            content=self.read_json(content),
            created_at=self.read_time(created),
            metadata=None if metadata is None else self.read_json(metadata),
        )

    def message_row(self, m: Message) -> tuple[Any, ...]:
        """A message as the values of `MESSAGE_COLUMNS`."""
        return (
            m.id,
            m.thread_id,
            m.resource_id,
            m.role,
            self.json_value(m.model_dump(mode="json")["content"]),
            self.time_value(m.created_at),
            None if m.metadata is None else self.json_value(m.metadata),
        )


@functools.cache
def _spelled(template: str, placeholder: str, ids: str) -> str:
    return template.replace("{ids}", ids).replace("?", placeholder)


class SqlStorage(Storage):
    """Storage over SQL tables; a subclass sets `db` and `dialect` and writes messages."""

    db: Database
    dialect: Dialect

    def _query(self, template: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.query(self.dialect.sql(template), params)

    def _wrote(self, tables: Sequence[str], rows: int) -> None:
        """Told after a write of `rows` rows; an engine that plans by statistics may
        refresh them."""

    # ---- resources ------------------------------------------------------------

    def _get_resource(self, resource_id: str) -> Resource | None:
        rows = self._query(
            f"SELECT {RESOURCE_COLUMNS} FROM recallstack_resources WHERE id = ?", (resource_id,)
        )
        return self.dialect.resource(rows[0]) if rows else None

    def _all_resources(self, after: str | None, limit: int) -> list[Resource]:
        where, params = ("", []) if after is None else ("WHERE id > ? ", [after])
        rows = self._query(
            f"SELECT {RESOURCE_COLUMNS} FROM recallstack_resources {where}ORDER BY id LIMIT ?",
            [*params, limit],
        )
        return [self.dialect.resource(r) for r in rows]

    def _save_resource(self, resource: Resource) -> Resource:
        d = self.dialect
        self._query(
            f"INSERT INTO recallstack_resources ({RESOURCE_COLUMNS}) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, "
            "created_at = excluded.created_at, updated_at = excluded.updated_at",
            (
                resource.id,
                d.json_value(resource.metadata),
                d.time_value(resource.created_at),
                d.time_value(resource.updated_at),
            ),
        )
        return resource

    # ---- threads --------------------------------------------------------------

    def _save_thread(self, thread: Thread) -> Thread:
        d = self.dialect
        self._query(
            f"INSERT INTO recallstack_threads ({THREAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id, "
            "title = excluded.title, metadata = excluded.metadata, "
            "created_at = excluded.created_at, updated_at = excluded.updated_at",
            (
                thread.id,
                thread.resource_id,
                thread.title,
                d.json_value(thread.metadata),
                d.time_value(thread.created_at),
                d.time_value(thread.updated_at),
            ),
        )
        return thread

    def _get_thread(self, thread_id: str) -> Thread | None:
        rows = self._query(
            f"SELECT {THREAD_COLUMNS} FROM recallstack_threads WHERE id = ?", (thread_id,)
        )
        return self.dialect.thread(rows[0]) if rows else None

    def _list_threads(
        self,
        resource_id: str,
        order_by: ThreadOrderBy,
        order: Order,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Thread], int]:
        direction = "DESC" if order == "desc" else "ASC"
        rows = self._query(
            f"SELECT {THREAD_COLUMNS} FROM recallstack_threads WHERE resource_id = ? "
            f"ORDER BY {order_by} {direction}, id {direction} LIMIT ? OFFSET ?",
            (resource_id, self.dialect.no_limit if limit is None else limit, offset),
        )
        ((total,),) = self._query(
            "SELECT count(*) FROM recallstack_threads WHERE resource_id = ?", (resource_id,)
        )
        return [self.dialect.thread(r) for r in rows], total

    def _all_threads(self, after: str | None, limit: int) -> list[Thread]:
        where, params = ("", []) if after is None else ("WHERE id > ? ", [after])
        rows = self._query(
            f"SELECT {THREAD_COLUMNS} FROM recallstack_threads {where}ORDER BY id LIMIT ?",
            [*params, limit],
        )
        return [self.dialect.thread(r) for r in rows]

    # ---- reading messages -------------------------------------------------------

    def _get_messages(self, ids: list[str]) -> list[Message]:
        rows = self._query(
            f"SELECT {MESSAGE_COLUMNS} FROM recallstack_messages "
            "WHERE id IN (SELECT value FROM {ids})",
            (self.dialect.ids_value(ids),),
        )
        return [self.dialect.message(r) for r in rows]

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
        d = self.dialect
        where = ["thread_id = ?"]
        params: list[Any] = [thread_id]
        if resource_id is not None:
            where.append(f"{d.unindexed}resource_id = ?")  # checked on the thread's rows
            params.append(resource_id)
        if start is not None:
            where.append("created_at >= ?")
            params.append(d.time_value(start))
        if end is not None:
            where.append("created_at <= ?")
            params.append(d.time_value(end))
        condition = " AND ".join(where)
        ((total,),) = self._query(
            f"SELECT count(*) FROM recallstack_messages WHERE {condition}", params
        )
        if limit == 0:
            return [], total
        direction = "DESC" if order == "desc" else "ASC"
        rows = self._query(
            f"SELECT {MESSAGE_COLUMNS} FROM recallstack_messages WHERE {condition} "
            f"ORDER BY created_at {direction}, id {direction} LIMIT ? OFFSET ?",
            [*params, d.no_limit if limit is None else limit, offset],
        )
        return [d.message(r) for r in rows], total

    # ---- the index ledger ---------------------------------------------------------

    def _mark_indexed(self, message_ids: list[str], index_name: str) -> None:
        self._query(
            "INSERT INTO recallstack_message_index SELECT value, ? FROM {ids} "
            "WHERE true ON CONFLICT DO NOTHING",  # WHERE: SQLite's parser needs one here
            (index_name, self.dialect.ids_value(message_ids)),
        )
        self._wrote(("recallstack_message_index",), len(message_ids))

    def _forget_indexed(self, message_ids: list[str], thread_id: str | None) -> None:
        self._query(
            "DELETE FROM recallstack_message_index WHERE message_id IN (SELECT value FROM {ids}) "
            "OR message_id IN (SELECT id FROM recallstack_messages WHERE thread_id = ?)",
            (self.dialect.ids_value(message_ids), thread_id),
        )

    def _unindexed(
        self, index_name: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[Message]:
        d = self.dialect
        later, params = "", [index_name]
        if after is not None:
            later = "AND (created_at, id) > (?, ?) "
            params += [d.time_value(after[0]), after[1]]
        rows = self._query(
            f"SELECT {MESSAGE_COLUMNS} {UNINDEXED} {later}ORDER BY created_at, id LIMIT ?",
            [*params, limit],
        )
        return [d.message(r) for r in rows]

    def _records_of(self, message_ids: list[str], index_name: str) -> set[str]:
        rows = self._query(
            "SELECT message_id FROM recallstack_message_index "
            "WHERE index_name = ? AND message_id IN (SELECT value FROM {ids})",
            (index_name, self.dialect.ids_value(message_ids)),
        )
        return {r[0] for r in rows}

    def _count_unindexed(self, index_name: str) -> int:
        ((count,),) = self._query(f"SELECT count(*) {UNINDEXED}", (index_name,))
        return int(count)

    def _index_names(self) -> list[str]:
        return [r[0] for r in self._query(INDEX_NAMES)]
