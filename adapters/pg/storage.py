"""Postgres storage: threads, messages and resources, with the indexes the reads need; the
SQL it shares with LibSQL is in `sql_storage.py`, here what is Postgres's own: its schema,
saving messages with their words, keyword search and neighbour windows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from recallstack.adapters.pg.database import Database
from recallstack.adapters.sql_storage import MESSAGE_COLUMNS, Dialect, SqlStorage
from recallstack.core.keywords import K1, B, words
from recallstack.core.messages import Message
from recallstack.core.records import Include


def _v1(cur: Any) -> None:
    cur.execute(
        'CREATE TABLE recallstack_resources (id text COLLATE "C" PRIMARY KEY, '
        "metadata jsonb NOT NULL, "
        "created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL)"
    )
    cur.execute(
        'CREATE TABLE recallstack_threads (id text COLLATE "C" PRIMARY KEY, '
        'resource_id text COLLATE "C" NOT NULL, '
        "title text, metadata jsonb NOT NULL, created_at timestamptz NOT NULL, "
        "updated_at timestamptz NOT NULL)"
    )
    cur.execute(
        'CREATE TABLE recallstack_messages (id text COLLATE "C" PRIMARY KEY, '
        'thread_id text COLLATE "C" NOT NULL, resource_id text COLLATE "C", '
        "role text NOT NULL, content jsonb NOT NULL, "
        "created_at timestamptz NOT NULL, metadata jsonb)"
    )
    cur.execute(
        "CREATE INDEX recallstack_messages_thread ON recallstack_messages "
        "(thread_id, created_at, id)"
    )
    cur.execute("CREATE INDEX recallstack_messages_resource ON recallstack_messages (resource_id)")
    cur.execute(
        "CREATE INDEX recallstack_threads_resource ON recallstack_threads "
        "(resource_id, created_at, id)"
    )
    cur.execute(
        "CREATE TABLE recallstack_message_index (message_id text NOT NULL, "
        "index_name text NOT NULL, PRIMARY KEY (message_id, index_name))"
    )
    cur.execute(
        "CREATE INDEX recallstack_message_index_name ON recallstack_message_index "
        "(index_name, message_id)"
    )


def _v2(cur: Any) -> None:
    """Listing a resource's threads by their last update."""
    cur.execute(
        "CREATE INDEX recallstack_threads_updated ON recallstack_threads "
        "(resource_id, updated_at, id)"
    )


WORDS, STATS = "recallstack_message_words", "recallstack_word_stats"
"""Keyword search: each searched message's word counts (jsonb, GIN-indexed keys), and
per resource how many messages it holds and their words in all."""


def _v3(cur: Any) -> None:
    """Keyword search (BM25 over each resource's own messages)."""
    cur.execute(
        f'CREATE TABLE {WORDS} (message_id text COLLATE "C" PRIMARY KEY, '
        'resource_id text COLLATE "C", thread_id text COLLATE "C" NOT NULL, '
        "length integer NOT NULL, words jsonb NOT NULL)"
    )
    cur.execute(f"CREATE INDEX {WORDS}_keys ON {WORDS} USING gin (words)")
    cur.execute(f"CREATE INDEX {WORDS}_resource ON {WORDS} (resource_id)")
    cur.execute(f"CREATE INDEX {WORDS}_thread ON {WORDS} (thread_id)")
    cur.execute(
        f'CREATE TABLE {STATS} (resource_id text COLLATE "C" PRIMARY KEY, '
        "documents bigint NOT NULL, words bigint NOT NULL)"
    )
    after = ""
    while True:
        cur.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM recallstack_messages "
            "WHERE id > %s ORDER BY id LIMIT 1000",
            (after,),
        )
        rows = cur.fetchall()
        if not rows:
            return
        after = rows[-1][0]
        _add_words(cur, [DIALECT.message(row) for row in rows])


def _add_words(cur: Any, messages: list[Message]) -> None:
    """Index these messages' words and count them per resource; keyword search covers
    what semantic recall embeds: text, not system messages."""
    counted = [(m, Counter(words(m.text))) for m in messages if m.role != "system"]
    counted = [(m, counts) for m, counts in counted if counts]
    cur.executemany(
        f"INSERT INTO {WORDS} VALUES (%s, %s, %s, %s, %s)",
        [(m.id, m.resource_id, m.thread_id, sum(c.values()), _json(dict(c))) for m, c in counted],
    )
    _count(cur, [(m.resource_id, 1, sum(c.values())) for m, c in counted])


def _remove_words(cur: Any, where: str, parameters: tuple[Any, ...]) -> None:
    """Drop the word rows `where` selects, and their counts."""
    cur.execute(f"DELETE FROM {WORDS} WHERE {where} RETURNING resource_id, length", parameters)
    gone: dict[str, list[int]] = {}
    for resource, length in cur.fetchall():
        gone.setdefault(resource, []).append(length)
    _count(cur, [(r, -len(lengths), -sum(lengths)) for r, lengths in gone.items()])


def _count(cur: Any, deltas: list[tuple[str | None, int, int]]) -> None:
    rows = [delta for delta in deltas if delta[0] is not None]
    if rows:
        cur.executemany(
            f"INSERT INTO {STATS} VALUES (%s, %s, %s) ON CONFLICT (resource_id) DO UPDATE SET "
            f"documents = {STATS}.documents + excluded.documents, "
            f"words = {STATS}.words + excluded.words",
            rows,
        )


WORD_SEARCH = f"""
WITH docs AS (
    SELECT message_id, thread_id, length, words FROM {WORDS}
    WHERE resource_id = %(resource)s AND words ?| %(terms)s
), hits AS (
    SELECT d.message_id, d.thread_id, d.length, t.term, (d.words ->> t.term)::float8 AS f
    FROM docs d CROSS JOIN unnest(%(terms)s::text[]) AS t(term)
    WHERE d.words ? t.term
), frequency AS (
    SELECT term, count(*) AS n FROM hits GROUP BY term
)
SELECT message_id, sum(
    greatest(ln((greatest(%(total)s, n) - n + 0.5) / (n + 0.5)), 1e-6)
    * f * %(k1_plus_1)s / (f + %(k1)s * (%(one_minus_b)s + %(b_per_mean)s * length))
) AS score
FROM hits JOIN frequency USING (term)
WHERE %(thread)s::text IS NULL OR thread_id = %(thread)s
GROUP BY message_id
ORDER BY score DESC, message_id
LIMIT %(limit)s
"""
"""BM25 of the resource's messages (keywords.py) in one statement of constant size. The
total is read before it, so a save between may leave it below a term's count: see
keywords.py."""

MIGRATIONS = [_v1, _v2, _v3]


def _json(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return None if value is None else Jsonb(value)


DIALECT = Dialect(
    placeholder="%s",
    ids="unnest(%s::text[]) AS value",
    ids_value=list,
    no_limit=None,
    unindexed="",
    json_value=_json,
    read_json=lambda value: value,  # the jsonb loader has read it (database.py)
)
"""Ids as one text array; JSON as jsonb and time as timestamptz, which psycopg reads."""


class PgStorage(SqlStorage):
    backend = "pg"
    keyword_search = True
    asyncio_driver = True

    db: Database
    dialect = DIALECT

    def __init__(self, url: str, **options: Any) -> None:
        self.db = Database(url, vector=False, **options)
        self.db.migrate("storage", MIGRATIONS)

    def close(self) -> None:
        self.db.close()

    def _delete_thread(self, thread_id: str) -> None:
        with self.db.cursor(transaction=True) as cur:
            _remove_words(cur, "thread_id = %s", (thread_id,))
            cur.execute(
                "DELETE FROM recallstack_message_index WHERE message_id IN "
                "(SELECT id FROM recallstack_messages WHERE thread_id = %s)",
                (thread_id,),
            )
            cur.execute("DELETE FROM recallstack_messages WHERE thread_id = %s", (thread_id,))
            cur.execute("DELETE FROM recallstack_threads WHERE id = %s", (thread_id,))

    def _save_messages(self, messages: list[Message]) -> None:
        rows = [DIALECT.message_row(m) for m in messages]
        with self.db.cursor(transaction=True) as cur:
            _remove_words(cur, "message_id = ANY(%s)", ([m.id for m in messages],))
            _add_words(cur, messages)
            cur.executemany(
                f"INSERT INTO recallstack_messages ({MESSAGE_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, "
                "resource_id = excluded.resource_id, role = excluded.role, "
                "content = excluded.content, created_at = excluded.created_at, "
                "metadata = excluded.metadata",
                rows,
            )
            cur.execute(
                "DELETE FROM recallstack_message_index WHERE message_id = ANY(%s)",
                ([m.id for m in messages],),
            )
        self._wrote(("recallstack_messages", "recallstack_message_words"), len(messages))

    def _include_windows(self, include: list[Include], resource_id: str | None) -> list[Message]:
        """All include windows in one statement: LATERAL cursor queries on the thread index,
        every target and neighbour of the caller's resource when one is given."""
        m_columns = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS.split(", "))
        rows = self.db.query(
            f"""
            WITH targets AS (
                SELECT t.id, t.thread_id, t.created_at, i.before, i.after
                FROM unnest(%(ids)s::text[], %(before)s::int[], %(after)s::int[])
                     AS i(id, before, after)
                JOIN recallstack_messages t ON t.id = i.id
                WHERE %(resource)s::text IS NULL OR t.resource_id = %(resource)s
            )
            SELECT {m_columns} FROM targets x JOIN recallstack_messages m ON m.id = x.id
            UNION
            SELECT b.* FROM targets x CROSS JOIN LATERAL (
                SELECT {m_columns} FROM recallstack_messages m
                WHERE m.thread_id = x.thread_id AND (m.created_at, m.id) < (x.created_at, x.id)
                AND (%(resource)s::text IS NULL OR m.resource_id = %(resource)s)
                ORDER BY m.created_at DESC, m.id DESC LIMIT x.before) b
            UNION
            SELECT a.* FROM targets x CROSS JOIN LATERAL (
                SELECT {m_columns} FROM recallstack_messages m
                WHERE m.thread_id = x.thread_id AND (m.created_at, m.id) > (x.created_at, x.id)
                AND (%(resource)s::text IS NULL OR m.resource_id = %(resource)s)
                ORDER BY m.created_at, m.id LIMIT x.after) a
            """,
            {
                "ids": [i.id for i in include],
                "before": [i.before for i in include],
                "after": [i.after for i in include],
                "resource": resource_id,
            },
        )
        return [DIALECT.message(r) for r in rows]

    def _delete_messages(self, ids: list[str]) -> None:
        with self.db.cursor(transaction=True) as cur:
            _remove_words(cur, "message_id = ANY(%s)", (ids,))
            cur.execute("DELETE FROM recallstack_messages WHERE id = ANY(%s)", (ids,))
            cur.execute("DELETE FROM recallstack_message_index WHERE message_id = ANY(%s)", (ids,))

    def _held_words(self, ids: list[str]) -> dict[str, Counter[str]]:
        rows = self.db.query(
            f"SELECT message_id, words FROM {WORDS} WHERE message_id = ANY(%s)", (ids,)
        )
        return {str(i): Counter(counts) for i, counts in rows}

    def _rewrite_words(self, messages: list[Message]) -> None:
        with self.db.cursor(transaction=True) as cur:
            _remove_words(cur, "message_id = ANY(%s)", ([m.id for m in messages],))
            cur.execute(
                "SELECT id FROM recallstack_messages WHERE id = ANY(%s)",
                ([m.id for m in messages],),
            )
            stored = {row[0] for row in cur.fetchall()}
            _add_words(cur, [m for m in messages if m.id in stored])
        self._wrote(("recallstack_message_words",), len(messages))

    def _search_words(
        self, terms: list[str], resource_id: str, thread_id: str | None, limit: int
    ) -> list[tuple[str, float]]:
        stats = self.db.query(
            f"SELECT documents, words FROM {STATS} WHERE resource_id = %s", (resource_id,)
        )
        if not stats or not stats[0][0]:
            return []
        total, all_words = stats[0]
        rows = self.db.query(
            WORD_SEARCH,
            {
                "resource": resource_id,
                "terms": terms,
                "total": float(total),
                "k1_plus_1": K1 + 1,
                "k1": K1,
                "one_minus_b": 1 - B,
                "b_per_mean": B / (all_words / total),
                "thread": thread_id,
                "limit": limit,
            },
        )
        return [(str(i), float(score)) for i, score in rows]

    def _wrote(self, tables: Sequence[str], rows: int) -> None:
        self.db.wrote(tables, rows)
