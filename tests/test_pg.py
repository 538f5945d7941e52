"""Postgres specifics, on a real server: plans, index builds, migrations, errors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import numpy as np
import psycopg
import pytest

from recallstack.adapters.pg.database import JSONB_OID, Database, jsonb_loader
from recallstack.adapters.pg.sql_filters import in_partition
from recallstack.adapters.pg.storage import MIGRATIONS, PgStorage
from recallstack.adapters.pg.vector import PgVectorStore
from recallstack.adapters.table_names import table_name
from recallstack.core.errors import BackendError, IndexNotFoundError, InvalidInputError
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE, Partition


def indexes(url: str, table: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (table,))
        return {r[0] for r in rows}


def test_resolved_by_url(pg_url: str) -> None:
    assert isinstance(registry().vector_store(pg_url), PgVectorStore)
    assert isinstance(registry().storage(pg_url.replace("postgresql://", "postgres://")), PgStorage)


def test_a_selective_filter_is_answered_exactly(pg_url: str) -> None:
    """HNSW with a post-filter would find few of these rare rows; the exact path finds all."""
    store = PgVectorStore(pg_url, exact_below=100)
    store.create_index("i", 16)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(3000, 16)).astype(np.float32)
    meta = [{"bucket": "rare" if i % 1000 == 0 else "common"} for i in range(3000)]
    store.upsert("i", [f"v{i}" for i in range(3000)], data, meta, partition=EVERYWHERE)
    query = -data[0]  # the rare rows are not near the query
    hits = store.query("i", query, 10, filter={"bucket": "rare"}, partition=EVERYWHERE)
    assert sorted(h.id for h in hits) == ["v0", "v1000", "v2000"]
    exact = PgVectorStore(pg_url, search="exact").query(
        "i", query, 10, filter={"bucket": "rare"}, partition=EVERYWHERE
    )
    assert [(h.id, round(h.score, 5)) for h in hits] == [(h.id, round(h.score, 5)) for h in exact]


def test_hnsw_recall_against_exact(pg_url: str) -> None:
    store = PgVectorStore(pg_url)
    exact = PgVectorStore(pg_url, search="exact")
    store.create_index("h", 32)
    data = np.random.default_rng(1).normal(size=(2000, 32)).astype(np.float32)
    store.upsert("h", [f"v{i}" for i in range(2000)], data, partition=EVERYWHERE)
    assert f"{table_name('h')}_ann" in indexes(pg_url, table_name("h"))
    found = 0
    for q in data[:20] + 0.05:
        found += len(
            {r.id for r in store.query("h", q, 10, partition=EVERYWHERE)}
            & {r.id for r in exact.query("h", q, 10, partition=EVERYWHERE)}
        )
    assert found / 200 >= 0.95


def test_ivfflat_waits_for_enough_rows(pg_url: str) -> None:
    store = PgVectorStore(pg_url)
    store.create_index("ivf", 8, config={"type": "ivfflat", "lists": 2})
    table = table_name("ivf")
    data = np.random.default_rng(2).normal(size=(30, 8)).astype(np.float32)
    store.upsert("ivf", [f"v{i}" for i in range(10)], data[:10], partition=EVERYWHERE)
    assert f"{table}_ann" not in indexes(pg_url, table)
    assert len(store.query("ivf", data[0], 5, partition=EVERYWHERE)) == 5  # exact until then
    store.upsert("ivf", [f"v{i}" for i in range(10, 30)], data[10:], partition=EVERYWHERE)
    assert f"{table}_ann" in indexes(pg_url, table)
    assert store.query("ivf", data[3], 1, partition=EVERYWHERE)[0].id == "v3"


def test_build_index_after_a_bulk_load(pg_url: str) -> None:
    store = PgVectorStore(pg_url)
    store.create_index("bulk", 8, config={"type": "flat"})
    table = table_name("bulk")
    assert f"{table}_ann" not in indexes(pg_url, table)
    data = np.random.default_rng(3).normal(size=(200, 8)).astype(np.float32)
    store.upsert("bulk", [f"v{i}" for i in range(200)], data, partition=EVERYWHERE)
    store.build_index("bulk", {"type": "hnsw", "m": 8})
    assert f"{table}_ann" in indexes(pg_url, table)
    assert store.query("bulk", data[7], 1, partition=EVERYWHERE)[0].id == "v7"
    with pytest.raises(IndexNotFoundError):
        store.build_index("nope", {"type": "hnsw"})


def test_an_index_dropped_elsewhere_is_missing(pg_url: str) -> None:
    store = PgVectorStore(pg_url)
    store.create_index("gone", 2)
    other = PgVectorStore(pg_url)
    other.delete_index("gone")
    with pytest.raises(IndexNotFoundError):
        store.query("gone", [1.0, 0.0], 1, partition=EVERYWHERE)


def test_injection_changes_nothing_else(pg_url: str) -> None:
    store = PgVectorStore(pg_url)
    store.create_index("inj", 2)
    store.upsert(
        "inj", ["a", "b"], [[1, 0], [0, 1]], [{"k": "x"}, {"k": "y"}], partition=EVERYWHERE
    )
    evil = ["x' OR '1'='1", 'x"); DROP TABLE recallstack_schema; --', "k$[0]", "') OR 1=1 --"]
    for text in [*evil, "$.k", '{"k": "x"}']:
        assert store.query("inj", [1, 0], 5, filter={"k": text}, partition=EVERYWHERE) == []
        assert (
            store.query("inj", [1, 0], 5, filter={"k": {"$gt": text}}, partition=EVERYWHERE) != []
            or text > "y"
        )
        store.delete("inj", filter={"k": text}, partition=EVERYWHERE)
    for key in evil:
        assert store.query("inj", [1, 0], 5, filter={key: "x"}, partition=EVERYWHERE) == []
        store.delete("inj", filter={key: {"$exists": True}}, partition=EVERYWHERE)
    assert store.describe_index("inj").count == 2
    assert store.db.query("SELECT count(*) FROM recallstack_schema")[0][0] >= 1


def test_migrates_an_older_schema(pg_url: str) -> None:
    old = Database(pg_url, vector=False)
    old.migrate("storage", MIGRATIONS[:1])
    old.query(
        "INSERT INTO recallstack_threads VALUES ('t', 'r', 'kept', '{}', now(), now())",
    )
    for message_id, role, text in [("a", "user", "Lisbon hotel"), ("b", "system", "Lisbon")]:
        old.query(
            "INSERT INTO recallstack_messages VALUES (%s, 't', 'r', %s, to_jsonb(%s::text), "
            "now(), NULL)",
            (message_id, role, text),
        )
    old.close()
    storage = PgStorage(pg_url)
    # keyword search covers the messages saved before it existed (not system messages)
    assert [i for i, _ in storage.search_words("lisbon", resource_id="r")] == ["a"]
    assert storage.db.query(
        "SELECT version FROM recallstack_schema WHERE component = 'storage'"
    ) == [(len(MIGRATIONS),)]
    assert "recallstack_threads_updated" in indexes(pg_url, "recallstack_threads")
    thread = storage.get_thread("t")
    assert thread is not None and thread.title == "kept"


def test_missing_pgvector_is_a_clear_error(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS plain")
        conn.execute("CREATE ROLE plain LOGIN")
        conn.execute("DROP EXTENSION IF EXISTS vector CASCADE")
    parts = urlsplit(pg_url)
    as_plain = parts._replace(netloc="plain@" + parts.netloc.split("@", 1)[-1]).geturl()
    with pytest.raises(BackendError, match="pgvector extension is not installed"):
        PgVectorStore(as_plain)


def test_an_unselective_filter_still_fills_top_k(pg_url: str) -> None:
    """Above `exact_below`, HNSW answers with an iterative scan: 2% of rows still give 10."""
    store = PgVectorStore(pg_url, exact_below=10)
    exact = PgVectorStore(pg_url, search="exact")
    store.create_index("u", 16)
    data = np.random.default_rng(4).normal(size=(3000, 16)).astype(np.float32)
    meta = [{"bucket": "some" if i % 50 == 0 else "other"} for i in range(3000)]
    store.upsert("u", [f"v{i}" for i in range(3000)], data, meta, partition=EVERYWHERE)
    found = 0
    for q in data[:10]:
        hits = store.query("u", q, 10, filter={"bucket": "some"}, partition=EVERYWHERE)
        assert len(hits) == 10
        assert all(h.metadata["bucket"] == "some" for h in hits)
        truth = {
            h.id for h in exact.query("u", q, 10, filter={"bucket": "some"}, partition=EVERYWHERE)
        }
        found += len(truth & {h.id for h in hits})
    assert found / 100 >= 0.9


def test_a_callers_pool_is_used_committed_and_left_open(pg_url: str) -> None:
    """A pool without autocommit: single statements (a delete here) still commit."""
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_url, min_size=1, max_size=1, configure=register_vector) as pool:
        store = PgVectorStore(pg_url, pool=pool)
        store.create_index("mine", 4)
        store.upsert(
            "mine", ["a", "b"], [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], partition=EVERYWHERE
        )
        store.delete("mine", ids=["b"], partition=EVERYWHERE)
        assert pool.get_stats()["requests_num"] > 0
        store.close()
        assert not pool.closed
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(f"SELECT id FROM {table_name('mine')}").fetchall() == [("a",)]
    own = PgVectorStore(pg_url)
    own.close()
    assert own.db.pool.closed


def test_a_pool_with_no_connection_to_give_is_a_backend_error(pg_url: str) -> None:
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool

    PgVectorStore(pg_url).close()  # creates the vector extension the pool's connections need
    autocommit = {"autocommit": True}
    with ConnectionPool(
        pg_url, min_size=1, max_size=1, timeout=0.5, kwargs=autocommit, configure=register_vector
    ) as pool:
        pool.wait()
        store = PgVectorStore(pg_url, pool=pool)
        store.create_index("busy", 2)
        with pool.connection(), pytest.raises(BackendError, match="postgres: couldn't get"):
            store.query("busy", [1, 0], 1, partition=EVERYWHERE)
        assert store.query("busy", [1, 0], 1, partition=EVERYWHERE) == []


JSON_DOCUMENTS = [
    {},
    {"a": [1, -2.5, 1e-7, 12345678901234567890123, None, True, False]},
    {"text": 'é ü 漢字 😀 \\ " \n \t', "nested": {"deep": {"x": [{}, []]}}},
    [1, "two", {"three": 3.0}],
    "a plain string",
    -0.0,
]


def test_jsonb_is_read_as_json_loads_reads_it(pg_url: str) -> None:
    """recallstack's cursors decode jsonb with their own loader; the values are json.loads'."""
    import json

    from psycopg.pq import Format
    from psycopg.types.json import Jsonb

    db = Database(pg_url, vector=False)
    for document in JSON_DOCUMENTS:
        [(value, text)] = db.query("SELECT %s::jsonb, %s::jsonb::text", (Jsonb(document),) * 2)
        assert value == json.loads(text)
        assert type(value) is type(json.loads(text))
    with db.cursor() as cur:
        assert cur.adapters.get_loader(JSONB_OID, Format.TEXT) is jsonb_loader()
    with db.pool.connection() as conn:  # the loader is the cursor's, not the connection's
        assert conn.adapters.get_loader(JSONB_OID, Format.TEXT) is not jsonb_loader()
    db.close()


@pytest.mark.parametrize("ef_search", [0, 1_001, "40", True])
def test_ef_search_stays_in_pgvectors_range(ef_search: object) -> None:
    with pytest.raises(InvalidInputError, match="ef_search"):
        PgVectorStore("postgresql://unused/db", ef_search=ef_search)  # type: ignore[arg-type]


def test_a_newer_schema_is_refused_and_left_untouched(pg_url: str) -> None:
    PgStorage(pg_url).close()
    db = Database(pg_url, vector=False)
    db.query("UPDATE recallstack_schema SET version = 99 WHERE component = 'storage'")
    with pytest.raises(BackendError, match="version 99, written by a newer recallstack"):
        PgStorage(pg_url)
    rows = db.query("SELECT version FROM recallstack_schema WHERE component = 'storage'")
    assert rows == [(99,)]
    db.close()


def planned_rows(url: str) -> dict[str, float]:
    """Each table's row count as the planner knows it (-1: never analyzed)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relkind = 'r' "
            "AND relnamespace = 'public'::regnamespace"
        ).fetchall()
    return dict(rows)


def test_a_bulk_load_refreshes_the_planners_statistics(pg_url: str) -> None:
    """Postgres plans from statistics autovacuum refreshes later (if at all): a table
    this process grew by a tenth, past 1,000 rows, is analyzed after the write."""
    from recallstack import Memory
    from recallstack.core.messages import Message

    with Memory(pg_url, pg_url, "hash/16", {"semantic_recall": {"top_k": 2}}) as memory:
        memory.create_thread("r", thread_id="t")
        small = [Message(id=f"s{n}", thread_id="t", role="user", content="hi") for n in range(10)]
        memory.save_messages(small)
        assert planned_rows(pg_url)["recallstack_messages"] == -1  # ten rows: left alone
        bulk = [
            Message(id=f"m{n}", thread_id="t", role="user", content=f"message {n}")
            for n in range(1_500)
        ]
        memory.save_messages(bulk)
        assert memory.semantic is not None
        table = table_name(memory.semantic.index_name())
    planned = planned_rows(pg_url)
    for name in ("recallstack_messages", "recallstack_message_index", table):
        assert planned[name] >= 1_000, name


LONG = "memory_messages_all_minilm_l6_v2_384"
"""An index name as Memory makes them: its table's name is too long for `<table>_<suffix>`."""


def test_every_index_of_a_long_named_table_exists(pg_url: str) -> None:
    """Postgres cuts names at 63 bytes; cut, `..._resource_id` and `..._resource_id_type`
    were one name, the second index was never made, and a scoped query scanned the
    whole table. Each partition key's index is made, and a partition is an index lookup."""
    store = PgVectorStore(pg_url)
    store.create_index(LONG, 4, config={"type": "hnsw"})
    table = table_name(LONG)
    assert len(f"{table}_resource_id_type") > 63  # cut, as the type indexes were
    made = indexes(pg_url, table)
    assert len(made) == 5  # primary key, metadata GIN, HNSW, one per partition key
    assert all(len(name) <= 63 for name in made)
    rng = np.random.default_rng(0)
    for r in range(100):
        ids = [f"m{r}-{n}" for n in range(30)]
        store.upsert(LONG, ids, rng.normal(size=(30, 4)), partition=Partition(f"r{r}"))
    sql, params = in_partition(Partition("r7", "t1"))
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"ANALYZE {table}")
        plan = "\n".join(
            r[0] for r in conn.execute(f"EXPLAIN SELECT id FROM {table} WHERE {sql}", params)
        )
    assert "Seq Scan" not in plan, plan
    store.close()


def test_an_older_schema_gets_the_indexes_it_missed(pg_url: str) -> None:
    store = PgVectorStore(pg_url)
    store.create_index(LONG, 4)
    store.close()
    table = table_name(LONG)
    wanted = indexes(pg_url, table)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as version 1 left it
        for name in wanted:
            if name.endswith("_thread_id"):
                conn.execute(f"DROP INDEX {name}")
        conn.execute("UPDATE recallstack_schema SET version = 1 WHERE component = 'vector'")
    assert indexes(pg_url, table) != wanted
    PgVectorStore(pg_url).close()
    assert indexes(pg_url, table) == wanted


def test_stores_opened_at_once_on_a_new_database(
    new_pg_database: Callable[[], str],
) -> None:
    """Processes that start together each create pgvector's extension if it is
    missing; the one that loses the race finds it there (it raised a BackendError
    saying pgvector was not installed, found under load)."""
    for _ in range(3):
        url = new_pg_database()
        barrier = threading.Barrier(6)

        def open_store(url: str = url, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            PgVectorStore(url).close()

        with ThreadPoolExecutor(6) as pool:
            for future in [pool.submit(open_store) for _ in range(6)]:
                future.result()
