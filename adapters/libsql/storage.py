"""LibSQL storage: threads, messages and resources in three indexed tables, the SQL
they share with Postgres in `sql_storage.py`; here, what is SQLite's own: its
schema, saving messages with their FTS5 words, keyword search and neighbour windows."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from recallstack.adapters.libsql.database import Database
from recallstack.adapters.libsql.word_index import FTS, LENGTHS, STATS, VOCABULARY, WordIndex
from recallstack.adapters.sql_storage import MESSAGE_COLUMNS, Dialect, SqlStorage
from recallstack.core.keywords import K1, B, words
from recallstack.core.messages import Message
from recallstack.core.records import Include

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ROWIDS = "SELECT rowid FROM recallstack_messages WHERE id IN (SELECT value FROM json_each(?))"
"""The message rows of a JSON array of ids: how the keyword index is kept in step."""


def to_us(value: datetime) -> int:
    """Datetimes are stored as UTC epoch microseconds: exact, and ordered as numbers."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


DIALECT = Dialect(
    placeholder="?",
    ids="json_each(?)",
    ids_value=json.dumps,
    no_limit=-1,
    unindexed="+",  # SQLite's unary plus: the column is checked, not looked up
    json_value=json.dumps,
    read_json=json.loads,
    time_value=to_us,
    read_time=from_us,
)
"""Ids as one JSON array, JSON as text, time as UTC epoch microseconds."""


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
        _add_words(db, [(row[0], DIALECT.message(row[1:])) for row in rows])


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
                if (w := words((m := DIALECT.message(row[1:])).text))
            ],
        )


MIGRATIONS = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]


class LibSQLStorage(SqlStorage):
    backend = "libsql"
    keyword_search = True

    db: Database
    dialect = DIALECT

    def __init__(self, url: str = "libsql:///local.db", **options: Any) -> None:
        self.db = Database(url, **options)
        self.db.migrate("storage", MIGRATIONS)
        self.words = WordIndex(self.db)

    def close(self) -> None:
        self.db.close()

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

    # ---- messages -------------------------------------------------------------

    def _save_messages(self, messages: list[Message]) -> None:
        rows = [DIALECT.message_row(m) for m in messages]
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
            self._forget_indexed([m.id for m in messages], None)

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
        return [DIALECT.message(r) for r in rows]

    def _delete_messages(self, ids: list[str]) -> None:
        with self.db.transaction():
            _remove_words(self.db, ROWIDS, (json.dumps(ids),))
            self.db.query(
                "DELETE FROM recallstack_messages WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
            self._forget_indexed(ids, None)

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
