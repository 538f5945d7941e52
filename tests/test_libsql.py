"""LibSQL specifics: URLs, names, schema migrations, transactions, other processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallstack.adapters.key_encoding import decode_key, encode_key
from recallstack.adapters.libsql.database import Database, Location, parse_url
from recallstack.adapters.libsql.sql_filters import decode_documents, encode_document
from recallstack.adapters.libsql.storage import LENGTHS, MIGRATIONS, STATS, LibSQLStorage
from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.adapters.table_names import table_name
from recallstack.core.errors import BackendError, InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.records import Include, Thread
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("libsql:///local.db", Location("local.db")),
        ("libsql:///dir/x.db", Location("dir/x.db")),
        ("libsql:////abs/x.db", Location("/abs/x.db")),
        ("libsql://:memory:", Location(":memory:")),
        ("libsql://db.example.turso.io", Location("", "libsql://db.example.turso.io")),
    ],
)
def test_urls(url: str, location: Location) -> None:
    assert parse_url(url) == location


@pytest.mark.parametrize("url", ["libsql:///", "libsql://", "postgresql://x"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_url(url)


def test_remote_needs_a_replica_file() -> None:
    with pytest.raises(InvalidInputError, match="replica="):
        Database("libsql://db.example.turso.io", auth_token="t")


@pytest.mark.parametrize(
    "name", ["memory_messages_all_minilm_l6_v2_384", "Weird Name/ü", "x" * 300, "a", "A"]
)
def test_table_names_are_valid_and_distinct(name: str) -> None:
    table = table_name(name)
    assert table.startswith("rsv_") and len(table) <= 60
    assert all(c.isascii() and (c.isalnum() or c == "_") for c in table)
    assert table_name(name) == table
    assert table_name(name + "!") != table


@pytest.mark.parametrize(
    "key", ["plain_key", 'it\'s "quoted" $[0] -- )', "ünï~code", "~7e", "", "é", "line\n", "a-b"]
)
def test_key_encoding_round_trips(key: str) -> None:
    plain = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
    encoded = encode_key(key)
    assert decode_key(encoded) == key
    assert set(encoded) <= plain | {"-"}
    assert (encoded == key) == (set(key) <= plain)  # plain keys keep their names


_KEYS = st.text(max_size=8) | st.sampled_from(["a-b", "-2d", "x", '"-41":', ",{"])
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12) | _KEYS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=4), min_size=1, max_size=4))
def test_documents_round_trip(documents: list[dict[str, Any]]) -> None:
    """Stored metadata decodes to what was written, whatever its keys and values hold
    (quotes, `-`, `":`): the one-pass decoding skips only documents of plain keys."""
    assert decode_documents(",".join(encode_document(d) for d in documents)) == documents


def test_resolved_from_the_registry(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'r.db'}"
    assert isinstance(registry().vector_store(url), LibSQLVectorStore)
    assert isinstance(registry().storage(url), LibSQLStorage)


def test_migrates_an_older_schema(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'old.db'}"
    old = Database(url)
    old.migrate("storage", MIGRATIONS[:1])  # a database written by schema version 1
    old.query(
        "INSERT INTO recallstack_threads VALUES ('t', 'r', 'kept', '{}', 0, 0)",
    )
    old.close()
    storage = LibSQLStorage(url)
    assert storage.db.query(
        "SELECT version FROM recallstack_schema WHERE component = 'storage'"
    ) == [(len(MIGRATIONS),)]
    indexes = {r[0] for r in storage.db.query("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "recallstack_messages_resource" in indexes
    thread = storage.get_thread("t")
    assert thread is not None and thread.title == "kept"
    LibSQLStorage(url)  # opening again migrates nothing twice


def test_a_recalls_reads_never_walk_a_whole_resource(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The windows of a few hits and a thread's page, scoped to a resource, are read
    through the ids and the thread, not through the resource's index: SQLite, without
    statistics, picked the resource index, which read every row of a large resource
    (12 ms a recall at 10,000 messages). Checked on the plans SQLite makes."""
    storage = LibSQLStorage(f"libsql:///{tmp_path / 'm.db'}")
    storage.save_thread(Thread(id="t", resource_id="maya"))
    storage.save_messages(
        [Message(id=f"m{n}", thread_id="t", role="user", content=f"note {n}") for n in range(30)]
    )
    statements: list[tuple[str, Any]] = []
    query = Database.query

    def recording(db: Database, sql: str, params: Any = ()) -> Any:
        statements.append((sql, params))
        return query(db, sql, params)

    monkeypatch.setattr(Database, "query", recording)
    windows = storage.message_windows([Include(id="m7", before=1, after=1)], resource_id="maya")
    page = storage.list_messages("t", resource_id="maya", per_page=5)
    monkeypatch.undo()
    assert [m.id for m in windows] == ["m6", "m7", "m8"] and len(page.items) == 5
    plans = [
        str(step)
        for sql, params in statements
        if "recallstack_messages" in sql
        for step in storage.db.query(f"EXPLAIN QUERY PLAN {sql}", params)
    ]
    assert plans and not [p for p in plans if "recallstack_messages_resource (resource_id=?)" in p]


def test_keyword_search_covers_messages_saved_before_it_existed(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'v3.db'}"
    old = Database(url)
    old.migrate("storage", MIGRATIONS[:3])  # schema version 3: no keyword search yet
    old.query("INSERT INTO recallstack_threads VALUES ('t', 'r', NULL, '{}', 0, 0)")
    rows = [
        ("a", "user", '"Lisbon hotel by the river"'),
        ("b", "system", '"Lisbon"'),
        ("c", "assistant", '[{"type": "text", "text": "a hotel in Porto"}]'),
    ]
    for message_id, role, content in rows:
        old.query(
            "INSERT INTO recallstack_messages VALUES (?, 't', 'r', ?, ?, 0, NULL)",
            (message_id, role, content),
        )
    old.close()
    storage = LibSQLStorage(url)
    assert [i for i, _ in storage.search_words("Lisbon hotel", resource_id="r")] == ["a", "c"]


def store_at_version(url: str, version: int) -> Database:
    """A store of three messages in thread 't' of resource 'r', at a schema version."""
    old = Database(url)
    old.migrate("storage", MIGRATIONS[:3])
    old.query("INSERT INTO recallstack_threads VALUES ('t', 'r', NULL, '{}', 0, 0)")
    texts = ["Lisbon hotel by the river", "a hotel in Porto, a long stay by the sea", "Lisbon"]
    for n, text in enumerate(texts):
        old.query(
            "INSERT INTO recallstack_messages VALUES (?, 't', 'r', 'user', ?, 0, NULL)",
            (f"m{n}", json.dumps(text)),
        )
    old.migrate("storage", MIGRATIONS[:version])
    return old


def test_word_lengths_are_filled_in_for_a_store_of_schema_version_4(tmp_path: Path) -> None:
    """Version 4 kept each message's word count only in FTS5's column; version 5 copies
    them to a plain table, which keyword search reads: the same scores."""
    url = f"libsql:///{tmp_path / 'v4.db'}"
    old = store_at_version(url, 4)
    old.query(f"DROP TABLE {LENGTHS}")  # as version 4 left it
    old.close()
    storage = LibSQLStorage(url)
    found = storage.search_words("Lisbon hotel", resource_id="r")
    reference = InMemoryStorage()
    reference.save_thread(storage.get_thread("t"))  # type: ignore[arg-type]
    reference.save_messages(storage.get_messages(["m0", "m1", "m2"]))
    assert found == reference.search_words("Lisbon hotel", resource_id="r")
    assert [i for i, _ in found] == ["m0", "m2", "m1"]


def test_a_store_of_schema_version_5_gains_the_word_index_counters(tmp_path: Path) -> None:
    """Version 5 had no `added`/`removed` counters nor a resource per length row;
    version 6 adds them, and the in-process word index reads them."""
    url = f"libsql:///{tmp_path / 'v5.db'}"
    old = store_at_version(url, 5)
    old.query(f"DROP INDEX {LENGTHS}_resource")  # as version 5 left them
    for table, column in ((LENGTHS, "resource_id"), (LENGTHS, "added")):
        old.query(f"ALTER TABLE {table} DROP COLUMN {column}")
    for column in ("added", "removed"):
        old.query(f"ALTER TABLE {STATS} DROP COLUMN {column}")
    old.close()
    storage = LibSQLStorage(url)
    for _ in range(2):  # FTS5's answer, then the copy's
        found = [i for i, _ in storage.search_words("Lisbon hotel", resource_id="r")]
        assert found == ["m0", "m2", "m1"]
    storage.save_messages(
        [Message(id="m9", thread_id="t", role="user", content="Lisbon Lisbon hotel")]
    )
    assert storage.search_words("Lisbon hotel", resource_id="r")[0][0] == "m9"


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'newer.db'}"
    LibSQLStorage(url).close()
    db = Database(url)
    db.query("UPDATE recallstack_schema SET version = 99 WHERE component = 'storage'")
    with pytest.raises(BackendError, match="version 99, written by a newer recallstack"):
        LibSQLStorage(url)
    assert db._shared.users == 1  # the refused store closed its share of the connection
    assert db.query("SELECT version FROM recallstack_schema WHERE component = 'storage'") == [(99,)]
    db.close()


def test_a_failed_transaction_writes_nothing(tmp_path: Path) -> None:
    storage = LibSQLStorage(f"libsql:///{tmp_path / 'tx.db'}")
    storage.save_thread(Thread(id="t", resource_id="r"))
    with pytest.raises(RuntimeError), storage.db.transaction():
        storage.db.query("DELETE FROM recallstack_threads")
        raise RuntimeError("boom")
    assert storage.get_thread("t") is not None


def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    storage = LibSQLStorage(f"libsql:///{tmp_path / 'batch.db'}")
    storage.save_thread(Thread(id="t", resource_id="r"))
    storage.db.query(
        "CREATE TRIGGER refuse BEFORE INSERT ON recallstack_messages "
        "WHEN NEW.id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    batch = [Message(id=i, thread_id="t", role="user", content=i) for i in ("ok", "bad")]
    with pytest.raises(Exception, match="refused"):
        storage.save_messages(batch)
    assert storage.get_messages(["ok"]) == []


def test_injection_changes_nothing_else(tmp_path: Path) -> None:
    store = LibSQLVectorStore(f"libsql:///{tmp_path / 'inj.db'}")
    store.create_index("i", 2)
    store.upsert("i", ["a", "b"], [[1, 0], [0, 1]], [{"k": "x"}, {"k": "y"}], partition=EVERYWHERE)
    evil = ["x' OR '1'='1", 'x"); DROP TABLE rsv; --', "k$[0]", "') OR 1=1 --", "*/ 1 /*"]
    for text in [*evil, "$.k"]:
        assert store.query("i", [1, 0], 5, filter={"k": text}, partition=EVERYWHERE) == []
        store.delete("i", filter={"k": text}, partition=EVERYWHERE)
    for key in evil:
        assert store.query("i", [1, 0], 5, filter={key: "x"}, partition=EVERYWHERE) == []
        store.delete("i", filter={key: {"$exists": True}}, partition=EVERYWHERE)
    assert store.describe_index("i").count == 2
    tables = {r[0] for r in store.db.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert table_name("i") in tables


def test_another_process_sees_writes_on_its_next_query(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'shared.db'}"
    store = LibSQLVectorStore(url)
    store.create_index("i", 2)
    store.upsert("i", ["a"], [[1, 0]], partition=EVERYWHERE)
    assert [r.id for r in store.query("i", [0, 1], 5, partition=EVERYWHERE)] == ["a"]  # cached now

    def other(code: str) -> None:
        script = textwrap.dedent(
            f"""
            from recallstack.adapters.libsql.vector import LibSQLVectorStore
            from recallstack.core.vectors import EVERYWHERE
            store = LibSQLVectorStore({url!r})
            {code}
            """
        )
        subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)

    other("store.upsert('i', ['b', 'a'], [[0, 1], [0.5, 0.5]], partition=EVERYWHERE)")
    results = store.query("i", [0, 1], 5, include_vector=True, partition=EVERYWHERE)
    assert [r.id for r in results] == ["b", "a"]
    assert np.allclose(results[1].vector or [], [0.5, 0.5])
    other("store.delete('i', ids=['b'], partition=EVERYWHERE)")
    assert [r.id for r in store.query("i", [0, 1], 5, partition=EVERYWHERE)] == ["a"]
    other("store.delete_index('i')")
    assert store.list_indexes() == []


def test_diskann_is_an_opt_in(tmp_path: Path) -> None:
    store = LibSQLVectorStore(f"libsql:///{tmp_path / 'ann.db'}")
    store.create_index("ann", 16, config={"type": "diskann"})
    store.create_index("exact", 16)
    data = np.random.default_rng(3).normal(size=(300, 16)).astype(np.float32)
    ids = [f"v{i}" for i in range(300)]
    meta = [{"even": i % 2 == 0} for i in range(300)]
    for name in ("ann", "exact"):
        store.upsert(name, ids, data, meta, partition=EVERYWHERE)
    indexes = {r[0] for r in store.db.query("SELECT name FROM sqlite_master WHERE type='index'")}
    assert f"{table_name('ann')}_ann" in indexes
    assert f"{table_name('exact')}_ann" not in indexes
    found = total = 0
    for q in data[:20] + 0.01:
        approximate = store.query("ann", q, 10, partition=EVERYWHERE)
        exact = store.query("exact", q, 10, partition=EVERYWHERE)
        found += len({r.id for r in approximate} & {r.id for r in exact})
        total += 10
        exact_scores = {r.id: r.score for r in store.query("exact", q, 300, partition=EVERYWHERE)}
        assert all(abs(r.score - exact_scores[r.id]) < 1e-5 for r in approximate)
        # filtered queries take the exact path
        assert store.query("ann", q, 5, filter={"even": True}, partition=EVERYWHERE) == store.query(
            "exact", q, 5, filter={"even": True}, partition=EVERYWHERE
        )
    assert found / total >= 0.9


def test_diskann_has_no_dotproduct(tmp_path: Path) -> None:
    from recallstack.core.errors import UnsupportedFeatureError

    store = LibSQLVectorStore(f"libsql:///{tmp_path / 'ann.db'}")
    with pytest.raises(UnsupportedFeatureError, match="dotproduct"):
        store.create_index("ann", 4, metric="dotproduct", config={"type": "diskann"})


def test_stores_of_one_file_share_one_connection(tmp_path: Path) -> None:
    """Two connections of one process wait on each other's write lock while holding
    the GIL; every store of the process opening a file shares one instead."""
    url = f"libsql:///{tmp_path / 'shared.db'}"
    storage, vector = LibSQLStorage(url), LibSQLVectorStore(url)
    assert storage.db._shared is vector.db._shared
    storage.close()
    vector.create_index("still-open", 2)  # the connection outlives the first store
    vector.close()
    again = LibSQLStorage(url)
    assert again.db._shared is vector.db._shared  # kept open for the next store
    assert again.list_threads("nobody").total == 0  # and it works
    again.close()


def test_threads_opening_a_new_file_at_once_share_one_connection(tmp_path: Path) -> None:
    """The file is looked at under the lock: a thread that saw no file yet must not
    open a second connection to the file another thread has just created (it did in
    about one try in three; CI then failed a migration with 'database is locked')."""

    def open_at_once(url: str) -> list[Database]:
        start = threading.Barrier(8)
        opened: list[Database] = []

        def open_it() -> None:
            start.wait()
            opened.append(Database(url))

        workers = [threading.Thread(target=open_it) for _ in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return opened

    for attempt in range(20):
        opened = open_at_once(f"libsql:///{tmp_path / f'new{attempt}.db'}")
        assert len({id(db._shared) for db in opened}) == 1


def test_a_new_file_at_the_same_path_gets_a_new_connection(tmp_path: Path) -> None:
    """The connection a process keeps is for the file it opened: one deleted and
    created again at that path is not written through the old one."""
    path = tmp_path / "replaced.db"
    url = f"libsql:///{path}"
    first = LibSQLStorage(url)
    first.save_thread(Thread(id="old", resource_id="r"))
    first.close()
    for leftover in tmp_path.glob("replaced.db*"):
        leftover.unlink()
    second = LibSQLStorage(url)
    assert second.db._shared is not first.db._shared
    assert second.get_thread("old") is None
    second.save_thread(Thread(id="new", resource_id="r"))
    second.close()
    assert path.exists()


def test_a_lock_held_too_long_is_a_backend_error(tmp_path: Path) -> None:
    import libsql

    path = tmp_path / "locked.db"
    storage = LibSQLStorage(f"libsql:///{path}", busy_timeout_ms=50)
    storage.save_thread(Thread(id="t", resource_id="r"))
    other = libsql.connect(str(path))  # another process's connection, in effect
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(BackendError, match="locked"):
            storage.save_thread(Thread(id="t2", resource_id="r"))
        with pytest.raises(BackendError, match="locked"):  # a transaction's BEGIN
            storage.save_messages([Message(id="m", thread_id="t", role="user", content="x")])
    finally:
        other.rollback()
        other.close()
    storage.save_messages([Message(id="m", thread_id="t", role="user", content="x")])
    storage.close()


def test_threads_of_one_process_save_and_recall_at_once(tmp_path: Path) -> None:
    """4 threads, each with its own Memory on one file, saving and recalling: every
    message stored once and indexed once, no error."""
    from concurrent.futures import ThreadPoolExecutor

    from recallstack import Memory

    url = f"libsql:///{tmp_path / 'threads.db'}"

    def work(worker: int) -> int:
        memory = Memory(url, url, "hash/32", {"semantic_recall": True})
        memory.create_thread("r", thread_id=f"t{worker}")
        for batch in range(20):
            messages = [
                Message(
                    id=f"w{worker}-{batch}-{i}",
                    thread_id=f"t{worker}",
                    role="user",
                    content=f"note {batch} {i}",
                )
                for i in range(10)
            ]
            assert memory.save_messages(messages).not_indexed == []
            memory.recall(f"t{worker}", vector_search_string=f"note {batch}")
        memory.close()
        return worker

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]
    memory = Memory(url, url, "hash/32", {"semantic_recall": True})
    assert memory.storage.get_messages([f"w3-19-{i}" for i in range(10)])
    name = memory.semantic.index_name()  # type: ignore[union-attr]
    assert memory.semantic.vector.describe_index(name).count == 800  # type: ignore[union-attr]
    assert memory.storage.unindexed(name) == []
    memory.close()


def test_a_save_neither_reloads_nor_copies_what_other_stores_hold(tmp_path: Path) -> None:
    """A save of new messages deletes no vector, so other processes fold the new
    rows into what they hold instead of reloading it, and append without a copy."""
    from recallstack import Memory

    url = f"libsql:///{tmp_path / 'warm.db'}"
    writer = Memory(url, url, "hash/16", {"semantic_recall": True})
    writer.create_thread("r", thread_id="t")
    first = [Message(id=f"a{i}", thread_id="t", role="user", content=f"x {i}") for i in range(50)]
    writer.save_messages(first)
    name = writer.semantic.index_name()  # type: ignore[union-attr]
    reader = LibSQLVectorStore(url)
    probe = np.ones(16, dtype=np.float32)
    reader.query(name, probe, 5, partition=EVERYWHERE)
    before = reader._snapshots[name]
    delete_version = before.delete_version

    writer.save_messages(
        [Message(id=f"b{i}", thread_id="t", role="user", content=f"y {i}") for i in range(5)]
    )
    assert len(reader.query(name, probe, 100, partition=EVERYWHERE)) == 55
    after = reader._snapshots[name]
    assert after.delete_version == delete_version  # no reload
    assert after.rows is before.rows  # appended in place, nothing copied
    assert before.size == 50 and after.size == 55  # the old snapshot still sees its rows
    writer.close()
    reader.close()


def test_remote_urls_are_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_url("libsql://[::1]:8080?authToken=t1") == Location(
        "", "libsql://[::1]:8080", "t1"
    )
    monkeypatch.setenv("TURSO_AUTH_TOKEN", "t2")
    assert parse_url("libsql://db.turso.io") == Location("", "libsql://db.turso.io", "t2")
    with pytest.raises(InvalidInputError, match="the port"):
        parse_url("libsql://db.turso.io:http")
