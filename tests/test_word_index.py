"""LibSQL's in-process word index (adapters/libsql/word_index.py): its answers equal
FTS5's and the reference's through adds, edits, moves, deletes, writes by another
store or process, reused rowids, a budget and an older schema."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallstack.adapters.libsql.storage import LibSQLStorage
from recallstack.adapters.libsql.word_index import WordIndex
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.core.messages import Message
from recallstack.core.records import Thread

T0 = datetime(2024, 1, 1, tzinfo=UTC)
VOCABULARY = ["lisbon", "porto", "hotel", "river", "train", "budget", "tea", "bikes", "cat"]
QUERIES = ["lisbon hotel", "train budget tea", "garden", "knee marathon bikes porto", "nothing"]


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 9)))


def message(i: int, thread: str, body: str, resource: str = "r") -> Message:
    return Message(
        id=f"m{i}",
        thread_id=thread,
        resource_id=resource,
        role="user",
        content=body,
        created_at=T0 + timedelta(seconds=i),
    )


def fts5_only(url: str) -> LibSQLStorage:
    """A store whose word index holds nothing: every search goes to FTS5."""
    storage = LibSQLStorage(url)
    storage.words = WordIndex(storage.db, budget=0)
    return storage


def same(found: list[tuple[str, float]], expected: list[tuple[str, float]]) -> bool:
    """The same ids in the same order, and scores equal but for float rounding (FTS5
    sums in SQL, the index in numpy)."""
    return [i for i, _ in found] == [i for i, _ in expected] and [
        s for _, s in found
    ] == pytest.approx([s for _, s in expected], rel=1e-12)


def assert_same(storage: LibSQLStorage, url: str, threads: list[str]) -> None:
    """The cached answers equal FTS5's and the reference's, whole resource and per thread."""
    plain = fts5_only(url)
    reference = InMemoryStorage()
    for resource in {t.resource_id for t in map(storage.get_thread, threads) if t}:
        for thread in storage.all_threads():
            if thread.resource_id == resource:
                reference.save_thread(thread)
                reference.save_messages(storage.list_messages(thread.id).items)
    for query, scope, limit in itertools.product(QUERIES, [None, *threads], [3, 40, 500]):
        found = storage.search_words(query, resource_id="r", thread_id=scope, limit=limit)
        assert same(found, plain.search_words(query, resource_id="r", thread_id=scope, limit=limit))
        expected = reference.search_words(query, resource_id="r", thread_id=scope, limit=limit)
        assert same(found, expected)
    plain.close()


def test_adds_edits_moves_and_deletes_are_seen(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'w.db'}"
    storage = LibSQLStorage(url)
    rng = random.Random(7)
    for t in ("a", "b"):
        storage.save_thread(Thread(id=t, resource_id="r"))
    storage.save_thread(Thread(id="other", resource_id="s"))
    storage.save_messages([message(i, rng.choice("ab"), text(rng)) for i in range(300)])
    storage.save_messages([message(i, "other", text(rng), "s") for i in range(300, 400)])
    assert_same(storage, url, ["a", "b"])
    copy = storage.words._resources["r"]
    storage.save_messages([message(i, "a", text(rng)) for i in range(0, 300, 7)])  # edits, moves
    storage.save_messages([message(i, "b", text(rng)) for i in range(400, 450)])  # adds
    assert_same(storage, url, ["a", "b"])
    for i in rng.sample(range(1000, 9000), 12):  # a turn at a time: each id placed among the rest
        storage.save_messages([message(i, "a", "lisbon hotel")])
        storage.search_words("lisbon", resource_id="r")
    assert_same(storage, url, ["a", "b"])
    storage.delete_messages([f"m{i}" for i in range(0, 300, 3)])
    assert_same(storage, url, ["a", "b"])
    assert storage.words._resources["r"] is copy  # brought up to date, not read afresh
    storage.delete_thread("b")
    assert_same(storage, url, ["a"])
    found = storage.search_words("lisbon", resource_id="s", limit=500)
    assert same(found, fts5_only(url).search_words("lisbon", resource_id="s", limit=500))


def test_writes_by_another_store_are_seen(tmp_path: Path) -> None:
    """Each store has its own cache; another's writes reach it through the counters."""
    url = f"libsql:///{tmp_path / 'w.db'}"
    reader, writer = LibSQLStorage(url), LibSQLStorage(url)
    rng = random.Random(3)
    writer.save_thread(Thread(id="a", resource_id="r"))
    writer.save_messages([message(i, "a", text(rng)) for i in range(100)])
    assert_same(reader, url, ["a"])
    copy = reader.words._resources["r"]
    writer.save_messages([message(i, "a", text(rng)) for i in range(50, 150)])
    assert_same(reader, url, ["a"])
    assert reader.words._resources["r"] is copy
    writer.delete_messages([f"m{i}" for i in range(140)])
    assert_same(reader, url, ["a"])
    assert reader.words._resources["r"] is not copy  # 10 live of 200 held: read afresh


def test_writes_by_another_process_are_seen(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'w.db'}"
    storage = LibSQLStorage(url)
    storage.save_thread(Thread(id="a", resource_id="r"))
    storage.save_messages([message(i, "a", "lisbon hotel") for i in range(3)])
    for _ in range(2):  # copied on the second search
        assert [i for i, _ in storage.search_words("porto", resource_id="r")] == []
    assert "r" in storage.words._resources
    script = f"""
        from recallstack.adapters.libsql.storage import LibSQLStorage
        from recallstack.core.messages import Message
        storage = LibSQLStorage({url!r})
        storage.delete_messages(["m0"])
        storage.save_messages([Message(id="m1", thread_id="a", role="user", content="porto")])
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=True)
    assert [i for i, _ in storage.search_words("porto hotel", resource_id="r")] == ["m1", "m2"]
    assert_same(storage, url, ["a"])


def test_the_first_search_is_fts5s_and_the_second_builds_the_copy(tmp_path: Path) -> None:
    """A one-off call (a CLI's) pays for no copy of its resource."""
    url = f"libsql:///{tmp_path / 'w.db'}"
    storage = LibSQLStorage(url)
    storage.save_thread(Thread(id="a", resource_id="r"))
    storage.save_messages([message(i, "a", "lisbon hotel") for i in range(3)])
    first = storage.search_words("hotel", resource_id="r")
    assert "r" not in storage.words._resources
    assert same(storage.search_words("hotel", resource_id="r"), first)
    assert "r" in storage.words._resources


def test_a_reused_rowid_is_not_taken_for_the_row_it_replaced(tmp_path: Path) -> None:
    """Deleting the newest message frees its rowid for the next one saved."""
    url = f"libsql:///{tmp_path / 'w.db'}"
    reader, writer = LibSQLStorage(url), LibSQLStorage(url)
    writer.save_thread(Thread(id="a", resource_id="r"))
    writer.save_messages([message(0, "a", "lisbon"), message(1, "a", "lisbon hotel")])
    for _ in range(2):  # copied on the second search
        assert [i for i, _ in reader.search_words("hotel", resource_id="r")] == ["m1"]
    copy = reader.words._resources["r"]
    (before,) = writer.db.query("SELECT rowid FROM recallstack_messages WHERE id = 'm1'")
    writer.delete_messages(["m1"])
    writer.save_messages([message(2, "a", "porto")])
    (after,) = writer.db.query("SELECT rowid FROM recallstack_messages WHERE id = 'm2'")
    assert before == after
    assert reader.search_words("hotel", resource_id="r") == []
    assert [i for i, _ in reader.search_words("porto lisbon", resource_id="r")] == ["m0", "m2"]
    assert reader.words._resources["r"] is copy


def test_a_budget_drops_the_least_recent_and_leaves_the_largest_to_fts5(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'w.db'}"
    storage = LibSQLStorage(url)
    rng = random.Random(5)
    for n, size in enumerate((40, 40, 400)):
        storage.save_thread(Thread(id=f"t{n}", resource_id=f"r{n}"))
        storage.save_messages(
            [message(n * 1000 + i, f"t{n}", text(rng), f"r{n}") for i in range(size)]
        )
    sizes = WordIndex(storage.db)
    for resource in ("r0", "r0", "r1", "r1"):  # a resource is copied on its second search
        sizes.search(["cat"], resource, None, 10)
    small, large = sorted(r.held for r in sizes._resources.values())
    storage.words = index = WordIndex(storage.db, budget=large + 1)  # one of r0, r1 at a time
    plain = fts5_only(url)
    for resource in ("r0", "r1", "r2", "r0"):
        for query in [*QUERIES, *QUERIES]:
            found = storage.search_words(query, resource_id=resource, limit=500)
            assert same(found, plain.search_words(query, resource_id=resource, limit=500))
    assert small + large > large + 1
    assert list(index._resources) == ["r0"]  # r1 dropped for it; r2 never fits
    read = index._read
    index._read = lambda *args: pytest.fail("r2's texts read though it cannot be held")  # type: ignore[method-assign]
    storage.search_words("lisbon", resource_id="r2")
    index._read = read  # type: ignore[method-assign]


def test_writers_and_searchers_at_once(tmp_path: Path) -> None:
    """4 threads saving and editing 5,000 messages into one resource while another searches:
    no search fails, and the last answers equal FTS5's."""
    url = f"libsql:///{tmp_path / 'w.db'}"
    storage = LibSQLStorage(url)
    for t in range(4):
        storage.save_thread(Thread(id=f"t{t}", resource_id="r"))
    done = threading.Event()
    errors: list[BaseException] = []

    def write(t: int) -> None:
        rng = random.Random(t)
        try:
            for batch in range(25):
                ids = range(t * 1250 + batch * 50, t * 1250 + batch * 50 + 50)
                storage.save_messages([message(i, f"t{t}", text(rng)) for i in ids])
                storage.save_messages([message(i, f"t{t}", text(rng)) for i in list(ids)[::10]])
        except BaseException as exc:
            errors.append(exc)

    def search() -> None:
        while not done.is_set():
            try:
                storage.search_words("lisbon hotel", resource_id="r", limit=100)
            except BaseException as exc:
                errors.append(exc)
                return

    writers = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    searcher = threading.Thread(target=search)
    for thread in [*writers, searcher]:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    searcher.join()
    assert not errors
    plain = fts5_only(url)
    for query in QUERIES:
        found = storage.search_words(query, resource_id="r", limit=1000)
        assert same(found, plain.search_words(query, resource_id="r", limit=1000))


SURROGATES = range(0xD800, 0xE000)


def test_fts5_holds_exactly_the_words_of_keywords_words_for_every_code_point(
    tmp_path: Path,
) -> None:
    """Every code point, alone and inside a word: FTS5's word instances of each message
    are `words(text)`, in order, so its first search and the cached copy read one set of
    words (with `unicode61` they disagreed on 23,671 code points)."""
    from recallstack.adapters.libsql.word_index import VOCABULARY
    from recallstack.core.keywords import words

    storage = LibSQLStorage(f"libsql:///{tmp_path / 'sweep.db'}")
    storage.save_thread(Thread(id="t", resource_id="r"))
    points = [c for c in range(1, 0x110000) if c not in SURROGATES]
    blocks = [points[i : i + 4096] for i in range(0, len(points), 4096)]
    texts = {
        f"b{n}": " ".join(f"a{chr(c)}b {chr(c)}" for c in block) for n, block in enumerate(blocks)
    }
    storage.save_messages(
        [Message(id=i, thread_id="t", role="user", content=t) for i, t in texts.items()]
    )
    differ = []
    for message_id, body in texts.items():
        ((rowid,),) = storage.db.query(
            "SELECT rowid FROM recallstack_messages WHERE id = ?", (message_id,)
        )
        held = storage.db.query(
            f"SELECT term FROM {VOCABULARY} WHERE doc = ? ORDER BY offset", (rowid,)
        )
        if [t for (t,) in held] != words(body):
            differ.append(message_id)
    assert not differ, f"{len(differ)} of {len(texts)} blocks tokenized otherwise by FTS5"


@pytest.mark.parametrize(
    ("body", "query"),
    [
        ("한국어 회의는 내일", "한국어"),  # Hangul
        ("がっこう に いく", "がっこう"),  # kana with dakuten
        ("ΟΔΟΣ Αθηνάς", "οδος"),  # final sigma
        ("مسألة مهمة", "مسألة"),  # hamza
    ],
)
def test_a_first_search_finds_what_later_searches_find(
    tmp_path: Path, body: str, query: str
) -> None:
    """A CLI call or a serverless worker only ever makes a store's first search."""
    url = f"libsql:///{tmp_path / 'first.db'}"
    writer = LibSQLStorage(url)
    writer.save_thread(Thread(id="t", resource_id="r"))
    writer.save_messages([message(1, "t", body), message(2, "t", "nothing here")])
    reference = InMemoryStorage()
    reference.save_thread(Thread(id="t", resource_id="r"))
    reference.save_messages([message(1, "t", body), message(2, "t", "nothing here")])
    expected = reference.search_words(query, resource_id="r")
    assert [i for i, _ in expected] == ["m1"]
    fresh = LibSQLStorage(url)
    first = fresh.search_words(query, resource_id="r")
    second = fresh.search_words(query, resource_id="r")
    assert same(first, expected) and same(second, expected)


def test_a_store_of_schema_version_6_is_tokenized_again(tmp_path: Path) -> None:
    """A store written with FTS5's `unicode61` is rebuilt with the words `words` gives."""
    from recallstack.adapters.libsql.database import Database
    from recallstack.adapters.libsql.storage import MIGRATIONS

    url = f"libsql:///{tmp_path / 'v6.db'}"
    old = Database(url)
    old.migrate("storage", MIGRATIONS[:6])
    old.query("INSERT INTO recallstack_threads VALUES ('t', 'r', NULL, '{}', 0, 0)")
    old.close()
    writer = LibSQLStorage.__new__(LibSQLStorage)  # writes as version 6 did: unicode61
    writer.db = Database(url)
    writer.words = WordIndex(writer.db, budget=0)
    writer.db.query(
        "INSERT INTO recallstack_messages VALUES ('m1', 't', 'r', 'user', ?, 0, NULL)",
        ('"한국어 회의"',),
    )
    writer.db.query(
        "INSERT INTO recallstack_messages_fts (rowid, text, resource_id, thread_id, length) "
        "SELECT rowid, '한국어 회의', 'r', 't', 2 FROM recallstack_messages"
    )
    writer.db.query(
        "INSERT INTO recallstack_word_lengths (doc, length, resource_id, added) "
        "SELECT rowid, 2, 'r', 1 FROM recallstack_messages"
    )
    writer.db.query("INSERT INTO recallstack_word_stats VALUES ('r', 1, 2, 1, 0)")
    assert writer.search_words("한국어", resource_id="r") == []  # the old tokenizer's miss
    writer.db.close()
    storage = LibSQLStorage(url)
    assert [i for i, _ in storage.search_words("한국어", resource_id="r")] == ["m1"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1))
def test_every_path_finds_a_texts_words_as_the_reference_does(tmp_path: Path, body: str) -> None:
    """Any script: FTS5 alone, the cached copy and the reference rank alike."""
    from recallstack.core.keywords import words

    if not words(body):
        return
    url = f"libsql:///{tmp_path / 'any.db'}"
    writer = LibSQLStorage(url)
    resource = f"r{len(writer.all_threads(limit=10_000))}"
    writer.save_thread(Thread(id=resource, resource_id=resource))
    reference = InMemoryStorage()
    reference.save_thread(Thread(id=resource, resource_id=resource))
    saved = [message(1, resource, body, resource), message(2, resource, "plain words", resource)]
    writer.save_messages([m.model_copy(update={"id": f"{resource}-{m.id}"}) for m in saved])
    reference.save_messages([m.model_copy(update={"id": f"{resource}-{m.id}"}) for m in saved])
    query = words(body)[0]
    expected = reference.search_words(query, resource_id=resource)
    assert same(fts5_only(url).search_words(query, resource_id=resource), expected)
    writer.search_words(query, resource_id=resource)
    assert same(writer.search_words(query, resource_id=resource), expected)  # the copy's
