"""LibSQL storage: threads, messages and resources in three indexed tables."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from recallstack.adapters.ledger_sql import INDEX_NAMES
from recallstack.adapters.libsql.database import Database
from recallstack.adapters.libsql.word_index import FTS, LENGTHS, STATS, VOCABULARY, WordIndex
from recallstack.core.contracts.storage import Order, Storage, ThreadOrderBy
from recallstack.core.keywords import K1, B, words
from recallstack.core.messages import Message
from recallstack.core.records import Include, Resource, Thread

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MESSAGE_COLUMNS = "id, thread_id, resource_id, role, content, created_at, metadata"
UNINDEXED = (
    "FROM recallstack_messages m WHERE NOT EXISTS (SELECT 1 FROM recallstack_message_index x "
    "WHERE x.index_name = ? AND x.message_id = m.id)"
)
"""The messages with no ledger record under one index name (the parameter)."""
ROWIDS = "SELECT rowid FROM recallstack_messages WHERE id IN (SELECT value FROM json_each(?))"
"""The message rows of a JSON array of ids: how the keyword index is kept in step."""


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


WORD_SEARCH = f"""
WITH hits AS (
    SELECT v.term, v.doc, count(*) AS f
    FROM json_each(?) t JOIN {VOCABULARY} v ON v.term = t.value
    JOIN recallstack_messages m ON m.rowid = v.doc
    WHERE m.resource_id = ?
    GROUP BY v.term, v.doc
), frequency AS (
    SELECT term, count(*) AS n FROM hits GROUP BY term
)
SELECT m.id, sum(
    max(ln((max(?, frequency.n) - frequency.n + 0.5) / (frequency.n + 0.5)), 1e-6)
    * hits.f * ? / (hits.f + ? * (? + ? * l.length))
) AS score
FROM hits JOIN frequency USING (term)
JOIN {LENGTHS} l ON l.doc = hits.doc
JOIN recallstack_messages m ON m.rowid = hits.doc
WHERE 1 {{in_thread}}
GROUP BY hits.doc
ORDER BY score DESC, m.id
LIMIT ?
"""
"""BM25 of the resource's messages (keywords.py), in one statement of constant size:
the words come as one JSON array, each looked up in FTS5's word index. The total is
read before it, so a save between may leave it below a term's count: see keywords.py."""


def _v4(db: Database) -> None:
    """Keyword search (FTS5, and BM25 over each resource's own messages)."""
    _fts_table(db, "unicode61 remove_diacritics 2")  # as version 4 made it; see _v7
    db.query(
        f"CREATE TABLE {STATS} (resource_id TEXT PRIMARY KEY, documents INTEGER NOT NULL, "
        "words INTEGER NOT NULL, added INTEGER NOT NULL DEFAULT 0, "
        "removed INTEGER NOT NULL DEFAULT 0)"
    )
    _lengths_table(db)
    after = -1
    while rows := db.query(
        f"SELECT rowid, {MESSAGE_COLUMNS} FROM recallstack_messages WHERE rowid > ? "
        "ORDER BY rowid LIMIT 1000",
        (after,),
    ):
        after = rows[-1][0]
        _add_words(db, [(row[0], _message(row[1:])) for row in rows])


def _fts_table(db: Database, tokenizer: str = "ascii") -> None:
    """FTS5 over each message's words, and its word instances (`VOCABULARY`)."""
    db.query(
        f"CREATE VIRTUAL TABLE {FTS} USING fts5(text, resource_id UNINDEXED, "
        f"thread_id UNINDEXED, length UNINDEXED, tokenize = '{tokenizer}')"
    )
    db.query(f"CREATE VIRTUAL TABLE {VOCABULARY} USING fts5vocab({FTS}, 'instance')")


def _add_words(db: Database, rows: list[tuple[int, Message]]) -> None:
    """Index the words of these (rowid, message) rows and count them per resource;
    keyword search covers what semantic recall embeds: text, not system messages.
    Each resource's `added` counter moves once, and its new rows carry the new value."""
    found = [(rowid, m, words(m.text)) for rowid, m in rows if m.role != "system"]
    searched = [(rowid, m, len(w)) for rowid, m, w in found if w]
    db.executemany(
        f"INSERT INTO {FTS} (rowid, text, resource_id, thread_id, length) VALUES (?, ?, ?, ?, ?)",
        [(rowid, " ".join(w), m.resource_id, m.thread_id, len(w)) for rowid, m, w in found if w],
    )
    added: dict[str | None, int] = {None: 0}
    for resource in dict.fromkeys(m.resource_id for _, m, _ in searched if m.resource_id):
        mine = [n for _, m, n in searched if m.resource_id == resource]
        ((added[resource],),) = db.query(
            f"INSERT INTO {STATS} (resource_id, documents, words, added) VALUES (?, ?, ?, 1) "
            "ON CONFLICT(resource_id) DO UPDATE SET documents = documents + excluded.documents, "
            "words = words + excluded.words, added = added + 1 RETURNING added",
            (resource, len(mine), sum(mine)),
        )
    db.executemany(
        f"INSERT INTO {LENGTHS} (doc, length, resource_id, added) VALUES (?, ?, ?, ?)",
        [(r, n, m.resource_id, added[m.resource_id]) for r, m, n in searched],
    )


def _remove_words(db: Database, rows_sql: str, parameters: tuple[Any, ...]) -> None:
    """Drop the keyword index rows of the message rows `rows_sql` selects, and their counts."""
    gone = db.query(
        f"SELECT resource_id, count(*), sum(length) FROM {FTS} WHERE rowid IN ({rows_sql}) "
        "GROUP BY resource_id",
        parameters,
    )
    db.query(f"DELETE FROM {FTS} WHERE rowid IN ({rows_sql})", parameters)
    db.query(f"DELETE FROM {LENGTHS} WHERE doc IN ({rows_sql})", parameters)
    db.executemany(
        f"UPDATE {STATS} SET documents = documents - ?, words = words - ?, removed = removed + 1 "
        "WHERE resource_id = ?",
        [(documents, length, resource) for resource, documents, length in gone if resource],
    )


def _lengths_table(db: Database) -> None:
    db.query(
        f"CREATE TABLE IF NOT EXISTS {LENGTHS} (doc INTEGER PRIMARY KEY, length INTEGER NOT NULL, "
        "resource_id TEXT, added INTEGER NOT NULL DEFAULT 0)"
    )
    db.query(f"CREATE INDEX IF NOT EXISTS {LENGTHS}_resource ON {LENGTHS} (resource_id, added)")


def _v5(db: Database) -> None:
    """Word lengths in a plain table (`LENGTHS`), filled from FTS5's column; a store made
    at version 4 since this release has it already."""
    _lengths_table(db)
    db.query(
        f"INSERT OR IGNORE INTO {LENGTHS} (doc, length, resource_id) "
        f"SELECT rowid, length, resource_id FROM {FTS}"
    )


def _v6(db: Database) -> None:
    """The counters and columns the in-process word index reads (`word_index.py`); a
    store made at version 4 or 5 since this release has them already."""
    for table, column, kind in (
        (STATS, "added", "INTEGER NOT NULL DEFAULT 0"),
        (STATS, "removed", "INTEGER NOT NULL DEFAULT 0"),
        (LENGTHS, "resource_id", "TEXT"),
        (LENGTHS, "added", "INTEGER NOT NULL DEFAULT 0"),
    ):
        if column not in {row[1] for row in db.query(f"PRAGMA table_info({table})")}:
            db.query(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
    db.query(
        f"UPDATE {LENGTHS} SET resource_id = (SELECT resource_id FROM {FTS} WHERE rowid = doc) "
        "WHERE resource_id IS NULL"
    )
    _lengths_table(db)


def _v7(db: Database) -> None:
    """One tokenizer: FTS5 holds each message's words as `keywords.words` gives them,
    split again by its `ascii` tokenizer, which keeps every such word whole. Its own
    `unicode61` disagreed with `words` on 23,671 code points (Hangul, kana with
    dakuten, final sigma...), so a search's first path missed what later ones found."""
    db.query(f"DROP TABLE {VOCABULARY}")
    db.query(f"DROP TABLE {FTS}")
    _fts_table(db)
    after = -1
    while rows := db.query(
        f"SELECT l.doc, {', '.join('m.' + c.strip() for c in MESSAGE_COLUMNS.split(','))} "
        f"FROM {LENGTHS} l JOIN recallstack_messages m ON m.rowid = l.doc WHERE l.doc > ? "
        "ORDER BY l.doc LIMIT 1000",
        (after,),
    ):
        after = rows[-1][0]
        db.executemany(
            f"INSERT INTO {FTS} (rowid, text, resource_id, thread_id, length) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                (row[0], " ".join(w), m.resource_id, m.thread_id, len(w))
                for row in rows
                if (w := words((m := _message(row[1:])).text))
            ],
        )


MIGRATIONS = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]


def _resource(row: tuple[Any, ...]) -> Resource:
    id_, metadata, created, updated = row
    return Resource(
        id=id_,
        metadata=json.loads(metadata),
        created_at=from_us(created),
        updated_at=from_us(updated),
    )


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
    keyword_search = True

    def __init__(self, url: str = "libsql:///local.db", **options: Any) -> None:
        self.db = Database(url, **options)
        self.db.migrate("storage", MIGRATIONS)
        self.words = WordIndex(self.db)

    def close(self) -> None:
        self.db.close()

    # ---- resources ------------------------------------------------------------

    def _get_resource(self, resource_id: str) -> Resource | None:
        rows = self.db.query(
            "SELECT id, metadata, created_at, updated_at FROM recallstack_resources WHERE id = ?",
            (resource_id,),
        )
        return _resource(rows[0]) if rows else None

    def _all_resources(self, after: str | None, limit: int) -> list[Resource]:
        rows = self.db.query(
            "SELECT id, metadata, created_at, updated_at FROM recallstack_resources "
            "WHERE ? IS NULL OR id > ? ORDER BY id LIMIT ?",
            (after, after, limit),
        )
        return [_resource(r) for r in rows]

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
            _remove_words(
                self.db, "SELECT rowid FROM recallstack_messages WHERE thread_id = ?", (thread_id,)
            )
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

    def _all_threads(self, after: str | None, limit: int) -> list[Thread]:
        rows = self.db.query(
            "SELECT * FROM recallstack_threads WHERE ? IS NULL OR id > ? ORDER BY id LIMIT ?",
            (after, after, limit),
        )
        return [_thread(r) for r in rows]

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
        ids = json.dumps([m.id for m in messages])
        with self.db.transaction():
            _remove_words(self.db, ROWIDS, (ids,))
            self.db.executemany(
                f"INSERT OR REPLACE INTO recallstack_messages ({MESSAGE_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            rowids = dict(
                self.db.query(
                    "SELECT id, rowid FROM recallstack_messages "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (ids,),
                )
            )
            _add_words(self.db, [(rowids[m.id], m) for m in messages])
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
            where.append("+resource_id = ?")  # checked on the thread's rows, not an index
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
        # the caller's resource bounds the targets and every neighbour alike; `+` keeps
        # SQLite from reading the resource's every row through its index rather than
        # the few rows named (12 ms a recall at 10,000 messages in one resource)
        scoped = resource_id is not None
        rows = self.db.query(
            f"""WITH RECURSIVE targets(r, before, after) AS (
                SELECT t.rowid, j.value ->> '$[1]', j.value ->> '$[2]'
                FROM json_each(?) j JOIN recallstack_messages t ON t.id = j.value ->> '$[0]'
                WHERE {"+t.resource_id = ? AND " if scoped else ""}1),
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
            _remove_words(self.db, ROWIDS, (json.dumps(ids),))
            self.db.query(
                "DELETE FROM recallstack_messages WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
            self._forget(ids)

    def _search_words(
        self, terms: list[str], resource_id: str, thread_id: str | None, limit: int
    ) -> list[tuple[str, float]]:
        """From the resource's cached postings (`word_index.py`); by FTS5 alone on the
        resource's first search in this store (the copy is built on the second) and when
        the resource is too large to cache."""
        cached = self.words.search(terms, resource_id, thread_id, limit)
        if cached is not None:
            return cached
        stats = self.db.query(
            f"SELECT documents, words FROM {STATS} WHERE resource_id = ?", (resource_id,)
        )
        if not stats or not stats[0][0]:
            return []
        total, all_words = stats[0]
        in_thread = "AND m.thread_id = ? " if thread_id is not None else ""
        rows = self.db.query(
            WORD_SEARCH.format(in_thread=in_thread),
            (
                json.dumps(terms),
                resource_id,
                total,
                K1 + 1,
                K1,
                1 - B,
                B / (all_words / total),
                *([thread_id] if thread_id is not None else []),
                limit,
            ),
        )
        return [(str(i), float(s)) for i, s in rows]

    def _held_words(self, ids: list[str]) -> dict[str, Counter[str]]:
        rows = self.db.query(
            f"SELECT m.id, f.text FROM recallstack_messages m JOIN {FTS} f ON f.rowid = m.rowid "
            "WHERE m.id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        )
        return {str(i): Counter(str(text).split(" ")) for i, text in rows}

    def _rewrite_words(self, messages: list[Message]) -> None:
        ids = json.dumps([m.id for m in messages])
        with self.db.transaction():
            _remove_words(self.db, ROWIDS, (ids,))
            rowids = dict(
                self.db.query(
                    "SELECT id, rowid FROM recallstack_messages "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (ids,),
                )
            )
            _add_words(self.db, [(rowids[m.id], m) for m in messages if m.id in rowids])

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
        return [r[0] for r in self.db.query(INDEX_NAMES)]
