"""`Memory.doctor()` and `recallstack doctor`: each kind of drift found, named and repaired,
on every backend; a memory without an embedder repairs what needs no model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from backends import BACKENDS, make_backends
from click.testing import CliRunner

from recallstack import Memory, Message
from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.cli import EXIT_FAILURE, main
from recallstack.core.contracts.storage import Storage
from recallstack.core.records import Thread
from recallstack.embedders.hashing import HashEmbedder

T0 = datetime(2024, 2, 1, tzinfo=UTC)
CONTEXT = {"semantic_recall": {"hybrid": {"context": 1}}}
PLAIN = {"semantic_recall": {"hybrid": False}}


def seed(memory: Memory, count: int = 40) -> None:
    memory.create_thread("r", thread_id="t")
    memory.save_messages(
        [
            Message(
                id=f"m{i:03d}",
                thread_id="t",
                role="user",
                content=f"message {i} about topic{i}",
                created_at=T0 + timedelta(seconds=i),
            )
            for i in range(count)
        ]
    )


def damage(memory: Memory) -> None:
    """What an older version, a crash or a write around recallstack leaves: vectors of
    deleted messages, a text changed with its vectors kept (and recorded current), and
    a keyword entry of another text."""
    storage = memory.storage
    assert memory.semantic is not None
    storage.delete_messages(["m003", "m020"])  # storage alone: their vectors stay
    (edited,) = storage.get_messages(["m010"])
    storage.save_messages([edited.model_copy(update={"content": "something else entirely"})])
    for name in memory.semantic.own_index_names():
        storage.mark_indexed(["m010"], name)  # as if its vectors were current
    (other,) = storage.get_messages(["m030"])
    if storage.keyword_search:
        storage._rewrite_words([other.model_copy(update={"content": "words of another text"})])


@pytest.mark.parametrize("kind", BACKENDS)
def test_each_drift_is_found_then_repaired(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    storage, vector = make_backends(kind, request, tmp_path)
    options = CONTEXT if storage.keyword_search else PLAIN
    with Memory(storage, vector, HashEmbedder(16), options) as memory:
        seed(memory)
        assert memory.doctor().ok
        damage(memory)
        found = memory.doctor()
        assert memory.semantic is not None
        plain = memory.semantic.index_name()
        assert sorted(found.orphans[plain]) == ["m003", "m020"]
        context = memory.semantic.context_index_name()
        if context is not None:
            # m010's own contextual vector and its follower's hold the old text;
            # the followers of the deleted ones hold theirs
            assert sorted(found.stale[context]) == ["m004", "m010", "m011", "m021"]
            assert found.words == ["m030"]
        assert not found.ok and found.drift >= 2
        repaired = memory.doctor(repair=True)
        assert repaired.ok, repaired.summary()
        assert repaired.unindexed == dict.fromkeys(repaired.indexes, 0)
        hits = memory.search("r", "something else entirely", top_k=1)
        assert hits[0].message.id == "m010"
        assert memory.doctor().ok


def test_a_memory_without_an_embedder_deletes_orphans_and_says_what_is_left(
    tmp_path: Path,
) -> None:
    url = f"libsql:///{tmp_path / 'm.db'}"
    with Memory(url, url, HashEmbedder(16), CONTEXT) as memory:
        seed(memory)
        damage(memory)
    with Memory(url, url) as bare:  # no embedder, the vector store given
        repaired = bare.doctor(repair=True)
        assert not repaired.orphans or not any(repaired.orphans.values())
        assert repaired.ok  # what it cannot embed is left unindexed, not stale
        assert repaired.left and "reindex()" in repaired.left[0]
    with Memory(url, url, HashEmbedder(16), CONTEXT) as memory:
        assert memory.reindex().indexed > 0
        checkup = memory.doctor()
        assert checkup.ok and not any(checkup.unindexed.values())


def test_the_command_exits_1_on_drift_and_0_once_repaired(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'c.db'}"
    with Memory(url, url, HashEmbedder(16), CONTEXT) as memory:
        seed(memory)
        damage(memory)
    args = ["doctor", "--db", str(tmp_path / "c.db"), "--embedder", "hash/16", "--quiet"]
    runner = CliRunner()
    found = runner.invoke(main, args)
    assert found.exit_code == EXIT_FAILURE, found.output
    assert "4 vectors without a message, 4 stale vectors" in found.output  # 2 indexes
    assert "1 word-index entries drifted" in found.output
    repaired = runner.invoke(main, [*args, "--repair"])
    assert repaired.exit_code == 0, repaired.output
    (after,) = [line for line in repaired.output.splitlines() if line.startswith("after repair:")]
    assert "; no drift" in after
    # the command's memory has the default options, contextual vectors among them
    assert "left: " not in repaired.output
    again = runner.invoke(main, args)
    assert again.exit_code == 0 and "no drift" in again.output


def test_a_delete_in_another_process_without_an_embedder_leaves_nothing_stale(
    tmp_path: Path,
) -> None:
    """The writer embeds context; another process, with no embedder at all, deletes a
    message: its text is searchable nowhere, and the writer's reindex() makes the
    follower's contextual vector again."""
    import subprocess
    import sys

    url = f"libsql:///{tmp_path / 'p.db'}"
    with Memory(url, url, HashEmbedder(16), CONTEXT) as memory:
        seed(memory, 6)
        memory.save_messages(
            [
                Message(
                    id="m002",
                    thread_id="t",
                    role="user",
                    content="zanzibar holiday",
                    created_at=T0 + timedelta(seconds=2),
                )
            ]
        )
        assert memory.search("r", "zanzibar", top_k=1)[0].message.id == "m002"
        held = {h.message.id: h.context_score for h in memory.search("r", "zanzibar holiday")}
        assert (held["m003"] or 0) > 0.3  # its contextual vector holds m002's text
    script = (
        "from recallstack import Memory\n"
        f"with Memory({url!r}, {url!r}) as m: m.delete_messages(['m002'])\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    with Memory(url, url, HashEmbedder(16), CONTEXT) as memory:
        assert memory.doctor().ok
        assert all("zanzibar" not in h.message.text for h in memory.search("r", "zanzibar"))
        assert not [h for h in memory.search("r", "zanzibar") if h.keyword_score]
        after = memory.search("r", "zanzibar holiday")
        assert all((h.context_score or 0) < 0.3 for h in after)
        assert memory.reindex().indexed == 1  # m003, whose context was m002
        checkup = memory.doctor()
        assert checkup.ok and not any(checkup.unindexed.values())


@pytest.mark.parametrize("kind", BACKENDS)
def test_index_states_agree_with_the_doctor_through_a_message_lifecycle(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """`Memory.index_states`, which the inspector shows: each state follows its message
    through a save, a system message, a write around recallstack, a delete and a repair,
    and its `stale` messages are the doctor's."""
    storage, vector = make_backends(kind, request, tmp_path)
    options = CONTEXT if storage.keyword_search else PLAIN
    with Memory(storage, vector, HashEmbedder(16), options) as memory:
        seed(memory, 6)
        assert memory.semantic is not None
        names = sorted(memory.semantic.own_index_names())
        system = Message(id="s", thread_id="t", role="system", content="be brief", created_at=T0)
        memory.save_messages([system])
        page = memory.storage.list_messages("t").items
        states = memory.index_states(page)
        assert sorted(states) == names
        for name in names:
            assert states[name].pop("s") == "not embedded"
            assert set(states[name].values()) == {"indexed"}

        (edited,) = memory.storage.get_messages(["m002"])  # edited around recallstack
        memory.storage.save_messages([edited.model_copy(update={"content": "other"})])
        memory.storage.delete_messages(["m004"])  # its vectors stay: not in any page
        page = memory.storage.list_messages("t").items
        states = memory.index_states(page)
        found = memory.doctor()
        for name in names:
            stale = sorted(i for i, s in states[name].items() if s == "stale")
            assert stale == sorted(found.stale.get(name, []))
            assert states[name]["m002"] == "not indexed"  # its save cleared its records
        context = memory.semantic.context_index_name()
        if context is not None:  # m003's contextual vector holds m002's old text
            assert states[context]["m003"] == "stale"

        memory.doctor(repair=True)
        states = memory.index_states(memory.storage.list_messages("t").items)
        for name in names:
            assert {s for i, s in states[name].items() if i != "s"} == {"indexed"}


def test_a_message_saved_without_recall_is_not_indexed_until_reindex(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'm.db'}"
    with Memory(url, url, HashEmbedder(16), PLAIN) as memory:
        seed(memory, 2)
    with Memory(url, url, HashEmbedder(16), {"semantic_recall": False}) as quiet:
        quiet.save_messages([Message(id="late", thread_id="t", role="user", content="later")])
    with Memory(url, url, HashEmbedder(16), PLAIN) as memory:
        (late,) = memory.get_messages(["late"])
        (states,) = memory.index_states([late]).values()
        assert states == {"late": "not indexed"}
        memory.reindex()
        (states,) = memory.index_states([late]).values()
        assert states == {"late": "indexed"}


def test_the_ledgers_default_recorded_answers_as_the_built_in_ones() -> None:
    """A storage that does not override `_records_of` (a third party's) gets the default,
    which walks the unrecorded messages: the same answer."""

    class Walking(InMemoryStorage):
        _records_of = Storage._records_of
        pages = 0

        def _unindexed(self, *args: Any) -> list[Message]:
            self.pages += 1
            return super()._unindexed(*args)

    answers = []
    start = datetime(2024, 1, 1, tzinfo=UTC)
    walking = Walking()
    for storage in (InMemoryStorage(), walking):
        storage.save_thread(Thread(id="t", resource_id="r"))
        storage.save_messages(
            [
                Message(
                    id=f"m{i}",
                    thread_id="t",
                    role="user",
                    content=f"message {i}",
                    created_at=start + timedelta(seconds=i),
                )
                for i in range(2_500)  # more than one page of the walk
            ]
        )
        storage.mark_indexed([f"m{i}" for i in range(0, 2_500, 3)], "plain")
        answers.append(storage.recorded(["m0", "m1", "m3", "m2499", "m2498", "nope"], "plain"))
        answers.append(storage.recorded(["m2", "m4"], "plain"))
    assert answers[0] == answers[2] == {"m0", "m3", "m2499"}
    assert answers[1] == answers[3] == set()
    walking.pages = 0
    assert walking.recorded(["m1200", "m1201"], "plain") == {"m1200"}
    assert walking.pages == 1  # the walk starts at m1200 and stops past m1201
