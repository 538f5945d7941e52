"""Export, import and migration between backends, through the CLI as users run them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recallstack import Memory
from recallstack.cli import EXIT_FAILURE, main
from recallstack.core.api.migration import (
    VectorSource,
    export_lines,
    import_records,
    migrate,
    parse_lines,
    sizes_of,
)
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.records import Resource
from recallstack.core.vectors import EVERYWHERE, Matrix
from recallstack.embedders.hashing import HashEmbedder

EMBEDDER = "hash/16"
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def fill(url: str, threads: int, per_thread: int) -> None:
    """`threads` threads over ten resources, `per_thread` messages each, one
    resource's working metadata, and a resource that owns no thread."""
    with Memory(url, url, EMBEDDER, {"semantic_recall": True}) as memory:
        memory.storage.save_resource(Resource(id="user0", metadata={"name": "Ada"}))
        memory.storage.save_resource(Resource(id="lurker", metadata={"threads": 0}))
        for t in range(threads):
            memory.create_thread(f"user{t % 10}", thread_id=f"t{t:05d}", title=f"chat {t}")
            memory.save_messages(
                [
                    Message(
                        id=f"t{t:05d}-m{i}",
                        thread_id=f"t{t:05d}",
                        role="user" if i % 2 == 0 else "assistant",
                        content=f"thread {t} message {i} about {('tea', 'bikes', 'rain')[i % 3]}",
                        created_at=T0 + timedelta(minutes=t * per_thread + i),
                        metadata={"i": i},
                    )
                    for i in range(per_thread)
                ]
            )


def dump(url: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["export", "--storage", url])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_export_then_import_gives_the_same_memory(tmp_path: Path) -> None:
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=12, per_thread=7)
    lines = dump(source)
    assert [line["type"] for line in lines].count("message") == 84
    kinds = [line["type"] for line in lines]
    assert kinds[:2] == ["resource", "resource"] and "resource" not in kinds[2:]  # first
    assert [line["data"]["id"] for line in lines[:2]] == ["lurker", "user0"]  # type: ignore[index]
    (tmp_path / "dump.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    options = ["--storage", target, "--vector", target, "--embedder", EMBEDDER, "--quiet"]
    result = CliRunner().invoke(main, ["import", *options, str(tmp_path / "dump.jsonl")])
    assert result.exit_code == 0, result.output
    assert "84 messages" in result.output
    assert dump(target) == lines
    with Memory(target, target, EMBEDDER, {"semantic_recall": True}) as memory:
        hits = memory.search("user3", "thread 3 message 1 about bikes", top_k=1)
        assert hits[0].message.id == "t00003-m1"


def test_a_bad_line_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=2, per_thread=3)
    lines = [json.dumps(line) for line in dump(source)]
    broken = tmp_path / "broken.jsonl"
    for bad in ('{"type": "message", "data": {"id": 5}}', "not json", '{"type": "vector"}'):
        broken.write_text("\n".join([*lines[:3], bad, *lines[3:]]))
        result = CliRunner().invoke(
            main, ["import", "--storage", target, "--embedder", EMBEDDER, str(broken)]
        )
        assert result.exit_code == EXIT_FAILURE
        assert "line 4" in result.output
    with Memory(target, target, EMBEDDER) as memory:
        assert memory.storage.all_threads() == []


def test_migrate_to_postgres_killed_midway_then_resumed(tmp_path: Path, pg_url: str) -> None:
    """10,000 messages from a LibSQL file to Postgres: the first run is killed once it
    has copied some, the second copies the rest and checks both sides agree."""
    source = f"libsql:///{tmp_path / 'big.db'}"
    fill(source, threads=1_000, per_thread=10)
    command = [sys.executable, "-m", "recallstack", "migrate", "--from", source, "--to", pg_url]
    command += ["--embedder", EMBEDDER]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert first.stderr is not None
    for line in first.stderr:  # not a terminal: a plain line per step
        assert line.startswith("migrate: "), line
        done = int(line.split()[1].replace(",", ""))
        if done >= 2_000:
            first.send_signal(signal.SIGKILL)
            break
    assert first.wait() == -signal.SIGKILL
    with Memory(pg_url, pg_url, EMBEDDER) as memory:
        partial = sum(sizes_of(memory.storage).values())
    assert 2_000 <= partial < 10_000
    second = subprocess.run([*command, "--json", "--quiet"], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    figures = json.loads(second.stdout)
    assert figures["verified"] and figures["sampled"] == 5
    assert (figures["threads"], figures["messages"]) == (1_000, 10_000)
    assert figures["copied_messages"] <= 10_000 - partial + 10 * 50  # resumed, not redone
    with Memory(pg_url, pg_url, EMBEDDER, {"semantic_recall": True}) as memory:
        assert sizes_of(memory.storage) == {f"t{t:05d}": 10 for t in range(1_000)}
        assert memory.storage.get_resource("user0").metadata == {"name": "Ada"}  # type: ignore[union-attr]
        assert memory.storage.get_resource("lurker").metadata == {"threads": 0}  # type: ignore[union-attr]
        assert memory.reindex().indexed == 0  # every message has its vectors


class CountingHash(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    embedded = 0

    def embed(self, texts: Sequence[str]) -> Matrix:
        CountingHash.embedded += len(texts)
        return super().embed(texts)


# Contextual vectors (the default) are embedded again on the target, not copied: these
# count the embeddings of messages' own vectors only
OWN_VECTORS = {"semantic_recall": {"hybrid": False}}


def stored(url: str, ids: list[str]) -> dict[str, list[float]]:
    with Memory(url, url, EMBEDDER, {"semantic_recall": True}) as memory:
        assert memory.semantic is not None
        name = memory.semantic.index_name()
        hits = memory.semantic.vector.query(
            name,
            [1.0] * 16,
            len(ids),
            filter={"message_id": {"$in": ids}},
            include_vector=True,
            partition=EVERYWHERE,
        )
        return {h.id: h.vector for h in hits if h.vector is not None}


def test_migrate_copies_the_vectors_of_the_same_model(tmp_path: Path) -> None:
    source = f"libsql:///{tmp_path / 'from.db'}"
    target = f"libsql:///{tmp_path / 'to.db'}"
    fill(source, threads=20, per_thread=10)
    with Memory(source, source, EMBEDDER, {"semantic_recall": True}) as memory:
        memory.storage.forget_indexed(["t00003-m4"])  # its vectors may be stale: embedded again
    CountingHash.embedded = 0
    with (
        Memory(source, source, EMBEDDER) as mine,
        Memory(target, target, CountingHash(16), OWN_VECTORS) as theirs,
    ):
        result = migrate(mine, theirs)
    assert result.verified and result.sampled == 5
    assert (result.copied_messages, result.copied_vectors) == (200, 199)
    assert CountingHash.embedded == 1 + result.sampled  # the stale message, the checks' queries
    ids = [f"t{t:05d}-m{i}" for t in range(20) for i in range(10)]
    assert stored(target, ids) == stored(source, ids)


def test_migrate_embeds_again_for_another_model(tmp_path: Path) -> None:
    source = f"libsql:///{tmp_path / 'from.db'}"
    target = f"libsql:///{tmp_path / 'to.db'}"
    fill(source, threads=5, per_thread=4)
    with (
        Memory(source, source, EMBEDDER) as mine,
        Memory(target, target, "hash/32", {"semantic_recall": True}) as theirs,
    ):
        result = migrate(mine, theirs)
        assert (result.copied_messages, result.copied_vectors) == (20, 0)
        assert theirs.semantic is not None
        assert theirs.semantic.index_name() != mine.semantic.index_name()  # type: ignore[union-attr]
        assert theirs.search("user1", "thread 1 message 2 about rain", top_k=1)


def test_export_with_vectors_then_import_writes_them(tmp_path: Path) -> None:
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=6, per_thread=5)
    options = ["--db", str(tmp_path / "a.db"), "--embedder", EMBEDDER, "--vectors"]
    result = CliRunner().invoke(main, ["export", *options])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds.count("vectors") == 6 and kinds.count("message") == 30  # one page a thread
    found = parse_lines(line.encode() for line in lines)
    CountingHash.embedded = 0
    with Memory(target, target, CountingHash(16), OWN_VECTORS) as memory:
        imported = import_records(memory, found)
        assert (imported.messages, imported.with_vectors) == (30, 30)
        assert CountingHash.embedded == 0  # every vector came from the dump
        hits = memory.search("user3", "thread 3 message 1 about bikes", top_k=1)
        assert hits[0].message.id == "t00003-m1"
    ids = [f"t{t:05d}-m{i}" for t in range(6) for i in range(5)]
    assert stored(target, ids) == stored(source, ids)
    with Memory(f"libsql:///{tmp_path / 'c.db'}", None, "hash/32", {"semantic_recall": True}) as m:
        assert import_records(m, found).with_vectors == 0  # another model: embedded


def test_vectors_that_do_not_fit_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=2, per_thread=3)
    with Memory(source, source, EMBEDDER, {"semantic_recall": True}) as memory:
        lines = list(export_lines(memory.storage, VectorSource.of(memory, memory)))
    bad = [json.loads(line) for line in lines]
    vectors = next(line for line in bad if line["type"] == "vectors")
    first = next(iter(vectors["data"]["chunks"]))
    vectors["data"]["chunks"][first] = [0.5] * 15
    found = parse_lines(json.dumps(line).encode() for line in bad)
    with Memory(target, target, EMBEDDER, {"semantic_recall": True}) as memory:
        with pytest.raises(InvalidInputError, match="expected 16 finite numbers"):
            import_records(memory, found)
        assert memory.storage.all_threads() == [] and memory.storage.all_resources() == []
    with pytest.raises(InvalidInputError, match="line 1"):
        parse_lines([b'{"type": "vectors", "data": {"index": "x", "chunks": {"a": "no"}}}'])


def test_export_vectors_of_a_model_never_indexed_is_refused(tmp_path: Path) -> None:
    fill(f"libsql:///{tmp_path / 'a.db'}", threads=1, per_thread=1)
    options = ["--db", str(tmp_path / "a.db"), "--embedder", "hash/32", "--vectors"]
    result = CliRunner().invoke(main, ["export", *options])
    assert result.exit_code == 1 and "holds no vectors of hash/32" in result.output


def test_migrate_into_a_memory_with_contextual_vectors(tmp_path: Path) -> None:
    """The target writes the contextual vectors the source never had; its own vectors
    are still copied."""
    source = f"libsql:///{tmp_path / 'from.db'}"
    target = f"libsql:///{tmp_path / 'to.db'}"
    fill(source, threads=5, per_thread=10)
    context = {"semantic_recall": {"hybrid": {"context": 1}}}
    with (
        Memory(source, source, EMBEDDER) as mine,
        Memory(target, target, EMBEDDER, context) as theirs,
    ):
        result = migrate(mine, theirs)
        assert result.verified and result.copied_vectors == 50
        assert theirs.reindex().indexed == 0
        assert theirs.semantic is not None
        name = theirs.semantic.context_index_name()
        assert name is not None and theirs.semantic.vector.describe_index(name).count == 50
        hits = theirs.search("user1", "thread 1 message 5 about bikes", top_k=1)
        assert hits[0].message.id == "t00001-m5" and hits[0].context_score is not None


def store_digest(url: str) -> dict[str, object]:
    """Everything a store holds that a user sees: resources, threads, messages (by
    content), the ledger and each index's vector count."""
    from recallstack.core.api.migration import message_digest, thread_digest
    from recallstack.core.api.store_pages import messages_of, resources_of, threads_of

    with Memory(url, url, EMBEDDER) as memory:
        storage, store = memory.storage, memory.vector
        assert store is not None
        threads = {t.id: thread_digest(t) for t in threads_of(storage)}
        return {
            "resources": [r.model_dump(mode="json") for r in resources_of(storage)],
            "threads": threads,
            "messages": {
                m.id: message_digest(m)
                for t in threads
                for page in messages_of(storage, t)
                for m in page
            },
            "ledger": sorted((n, storage.count_unindexed(n)) for n in storage.index_names()),
            "vectors": {n: store.describe_index(n).count for n in store.list_indexes()},
        }


def import_dump(lines: list[dict[str, object]], target: str, folder: Path) -> Any:
    """`recallstack import` of these dump lines into the target's storage and vectors."""
    path = folder / "dump.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    options = ["--storage", target, "--vector", target, "--embedder", EMBEDDER, "--quiet"]
    return CliRunner().invoke(main, ["import", *options, str(path)])


def test_a_second_migration_copies_edits_and_removes_deletes(tmp_path: Path) -> None:
    """Edit one message, delete one and add another in the same thread (its count
    unchanged), change a thread's title and delete a thread: the second run copies
    and removes exactly that, and its check compares content, not counts."""
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=16, per_thread=5)
    with Memory(source, source, EMBEDDER, {"semantic_recall": True}) as mine:
        with Memory(target, target, EMBEDDER, {"semantic_recall": True}) as theirs:
            assert migrate(mine, theirs).verified
        edited = mine.storage.get_messages(["t00001-m2"])[0]
        mine.update_messages([edited.model_copy(update={"content": "now about trains"})])
        mine.delete_messages(["t00002-m0"])
        mine.save_messages(
            [Message(id="t00002-new", thread_id="t00002", role="user", content="a new one")]
        )
        mine.storage.update_thread("t00003", title="renamed")
        mine.delete_thread("t00004")
        with Memory(target, target, EMBEDDER, {"semantic_recall": True}) as theirs:
            again = migrate(mine, theirs)
            assert again.verified, again.problems
            assert (again.copied_messages, again.removed_messages) == (2, 1)
            assert (again.copied_threads, again.removed_threads) == (1, 1)
            assert again.checked == 16 * 5 - 5
            hits = theirs.search("user1", "now about trains", top_k=1)
            assert hits[0].message.text == "now about trains"
            assert theirs.storage.get_messages(["t00002-m0"]) == []
            assert theirs.doctor().ok
    assert store_digest(target)["messages"] == store_digest(source)["messages"]
    assert store_digest(target)["threads"] == store_digest(source)["threads"]


def test_the_check_lists_every_difference(tmp_path: Path) -> None:
    """A target changed behind the migration's back: each difference is listed, and
    the CLI exits 1."""
    from recallstack.core.api.migration import Migration, verify

    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=4, per_thread=4)
    with (
        Memory(source, source, EMBEDDER, {"semantic_recall": True}) as mine,
        Memory(target, target, EMBEDDER, {"semantic_recall": True}) as theirs,
    ):
        assert migrate(mine, theirs).verified
        (message,) = theirs.storage.get_messages(["t00001-m1"])
        theirs.storage.save_messages([message.model_copy(update={"metadata": {"i": 99}})])
        theirs.storage.update_thread("t00002", title="other")
        theirs.storage.save_messages(
            [Message(id="stray", thread_id="t00003", role="user", content="x")]
        )
        assert theirs.vector is not None and theirs.semantic is not None
        theirs.vector.delete(theirs.semantic.index_name(), ids=["t00000-m3"], partition=EVERYWHERE)
        result = Migration()
        verify(mine, theirs, result)
        found = "\n".join(result.problems)
        assert "1 messages differ in the target" in found and "'t00001-m1'" in found
        assert "1 threads differ in the target" in found and "'t00002'" in found
        assert "threads hold messages in the target" in found and "'t00003'" in found
        assert "have no vectors in the target's index" in found and "'t00000-m3'" in found
    command = ["migrate", "--from", source, "--to", target, "--embedder", EMBEDDER, "--quiet"]
    runs = CliRunner().invoke(main, command)
    assert runs.exit_code == 0, runs.output  # the second run puts the target right
    assert "verified" in runs.output
    assert store_digest(target)["messages"] == store_digest(source)["messages"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda lines: lines.append(lines[3]), "is on line 4 already"),
        (
            lambda lines: lines.append(
                {
                    "type": "message",
                    "data": {"id": "x", "thread_id": "nowhere", "role": "user", "content": "hi"},
                }
            ),
            "thread 'nowhere' is neither in the dump",
        ),
        (
            lambda lines: lines.append(
                {
                    "type": "message",
                    "data": {
                        "id": "x",
                        "thread_id": "t00000",
                        "resource_id": "user7",
                        "role": "user",
                        "content": "hi",
                    },
                }
            ),
            "differs from its thread's 'user0'",
        ),
        (
            lambda lines: lines.append(
                {"type": "thread", "data": {"id": "theirs", "resource_id": "user0"}}
            ),
            "thread 'theirs' belongs to another resource in the store",
        ),
        (
            lambda lines: lines.append(
                {
                    "type": "message",
                    "data": {
                        "id": "their-message",
                        "thread_id": "t00000",
                        "role": "user",
                        "content": "mine now",
                    },
                }
            ),
            "message 'their-message' belongs to another resource in the store",
        ),
    ],
)
def test_a_refused_import_leaves_the_store_exactly_as_it_was(
    tmp_path: Path, change: object, why: str
) -> None:
    """Each refusal names the line, and is found before anything is written, even when
    the refused line comes after hundreds of good ones."""
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=3, per_thread=200)
    with Memory(target, target, EMBEDDER, {"semantic_recall": True}) as memory:
        memory.create_thread("stranger", thread_id="theirs")
        memory.save_messages(
            [Message(id="their-message", thread_id="theirs", role="user", content="private")]
        )
    before = store_digest(target)
    lines = dump(source)
    change(lines)  # type: ignore[operator]
    result = import_dump(lines, target, tmp_path)
    assert result.exit_code == EXIT_FAILURE, result.output
    assert f"line {len(lines)}" in result.output and why in result.output
    assert store_digest(target) == before


@pytest.mark.parametrize("vector", [[0.0] * 16, [float("nan")] + [0.1] * 15])
def test_a_zero_or_nan_vector_is_refused_naming_its_line(
    tmp_path: Path, vector: list[float]
) -> None:
    source, target = f"libsql:///{tmp_path / 'a.db'}", f"libsql:///{tmp_path / 'b.db'}"
    fill(source, threads=2, per_thread=3)
    options = ["--db", str(tmp_path / "a.db"), "--embedder", EMBEDDER, "--vectors"]
    lines = [
        json.loads(x) for x in CliRunner().invoke(main, ["export", *options]).output.splitlines()
    ]
    at = max(n for n, line in enumerate(lines) if line["type"] == "vectors")
    chunks = lines[at]["data"]["chunks"]  # type: ignore[index]
    chunks[next(iter(chunks))] = vector
    before = store_digest(target)
    result = import_dump(lines, target, tmp_path)
    assert result.exit_code == EXIT_FAILURE, result.output
    assert f"line {at + 1}: the vectors of chunk" in result.output
    assert "Traceback" not in result.output
    assert store_digest(target) == before
