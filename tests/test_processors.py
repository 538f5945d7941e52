"""The processors on their own, as any agent loop would use them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.api.memory import Memory
from recallstack.core.api.message_history import MessageHistory
from recallstack.core.contracts.processor import RequestContext
from recallstack.core.errors import NotFoundError
from recallstack.core.messages import Message
from recallstack.core.recall import SemanticRecall
from recallstack.core.recall.other_threads import render
from recallstack.core.recall.retrieval import merge_chronologically
from recallstack.core.records import Thread
from recallstack.embedders.hashing import HashEmbedder

T0 = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def storage() -> InMemoryStorage:
    s = InMemoryStorage()
    s.save_thread(Thread(id="here", resource_id="ada", title="Current"))
    s.save_thread(Thread(id="there", resource_id="ada", title="Garden"))
    s.save_thread(Thread(id="bobs", resource_id="bob"))
    s.save_messages(
        [
            Message(
                id="h0",
                thread_id="here",
                role="user",
                content="tomatoes need sun",
                created_at=at(0),
            ),
            Message(
                id="h1",
                thread_id="here",
                role="assistant",
                content="yes, six hours",
                created_at=at(1),
            ),
            Message(
                id="h2",
                thread_id="here",
                role="user",
                content="unrelated chatter",
                created_at=at(2),
            ),
            Message(
                id="x0",
                thread_id="there",
                role="user",
                content="my tomatoes split open",
                created_at=at(3),
            ),
            Message(
                id="x1",
                thread_id="there",
                role="assistant",
                content="water them evenly",
                created_at=at(4),
            ),
            Message(
                id="b0",
                thread_id="bobs",
                role="user",
                content="Bob tomatoes secret",
                created_at=at(5),
            ),
        ]
    )
    return s


@pytest.fixture
def recall(storage: InMemoryStorage) -> SemanticRecall:
    processor = SemanticRecall(
        storage=storage,
        vector=InMemoryVectorStore(),
        embedder=HashEmbedder(256),
        top_k=2,
        message_range={"before": 0, "after": 1},
    )
    processor.index(storage.list_messages("here").items)
    processor.index(storage.list_messages("there").items)
    processor.index(storage.list_messages("bobs").items)
    return processor


def test_identity(recall: SemanticRecall) -> None:
    assert (recall.id, recall.name) == ("semantic-recall", "SemanticRecall")
    assert (MessageHistory.id, MessageHistory.name) == ("message-history", "MessageHistory")


def test_process_input_adds_same_and_cross_thread_memories(recall: SemanticRecall) -> None:
    system = Message(id="sys", thread_id="here", role="system", content="be kind", created_at=at(9))
    question = Message(
        id="q", thread_id="here", role="user", content="why do tomatoes split", created_at=at(10)
    )
    out = recall.process_input([system, question], RequestContext("here", "ada"))
    assert [m.id for m in out] == ["sys", "semantic-recall:here", "h0", "h1", "q"]
    assert [m.source for m in out] == [None, "memory", "memory", "memory", None]
    note = out[1]
    assert note.role == "system"
    assert note.text == (
        "The following messages were remembered from other conversations:\n"
        "<remembered_from_other_conversation>\n"
        'Conversation "Garden", 2024-01-15:\n'
        "[10:33 UTC] User: my tomatoes split open\n"
        "[10:34 UTC] Assistant: water them evenly\n"
        "<end_remembered_from_other_conversation>"
    )
    assert "Bob" not in "".join(m.text for m in out)


def test_input_messages_are_not_repeated(recall: SemanticRecall, storage: InMemoryStorage) -> None:
    history = storage.get_messages(["h0", "h1"])
    question = Message(
        id="q", thread_id="here", role="user", content="tomatoes sun", created_at=at(10)
    )
    out = recall.process_input([*history, question], RequestContext("here", "ada"))
    assert [m.id for m in out].count("h0") == 1
    assert [m.id for m in out if m.role != "system"] == ["h0", "h1", "q"]


def test_no_user_message_no_recall(recall: SemanticRecall) -> None:
    calls = recall.embedder.calls
    only = [Message(id="a", thread_id="here", role="assistant", content="tomatoes")]
    assert recall.process_input(only, RequestContext("here", "ada")) == only
    assert recall.embedder.calls == calls


def test_turned_off_per_call(recall: SemanticRecall) -> None:
    question = [Message(id="q", thread_id="here", role="user", content="tomatoes")]
    context = RequestContext("here", "ada", {"semantic_recall": False})
    assert recall.process_input(question, context) == question


def test_per_call_config_merges(recall: SemanticRecall) -> None:
    question = [
        Message(id="q", thread_id="here", role="user", content="tomatoes split", created_at=at(10))
    ]
    context = RequestContext("here", "ada", {"semantic_recall": {"scope": "thread", "top_k": 1}})
    out = recall.process_input(question, context)
    assert all(m.thread_id == "here" for m in out)
    assert [m.id for m in out] == ["h0", "h1", "q"]


def test_fails_open(recall: SemanticRecall, caplog: pytest.LogCaptureFixture) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("vector store down")

    recall.vector.query = explode  # type: ignore[method-assign]
    question = [Message(id="q", thread_id="here", role="user", content="tomatoes")]
    with caplog.at_level(logging.ERROR):
        assert recall.process_input(question, RequestContext("here", "ada")) == question
    assert "vector store down" in caplog.text


def test_resource_taken_from_the_thread(recall: SemanticRecall) -> None:
    question = [
        Message(id="q", thread_id="here", role="user", content="tomatoes split", created_at=at(10))
    ]
    out = recall.process_input(question, RequestContext("here"))
    assert "semantic-recall:here" in [m.id for m in out]


def test_output_indexes_new_messages_only(recall: SemanticRecall, storage: InMemoryStorage) -> None:
    name = recall.index_name()
    before = recall.vector.describe_index(name).count
    fresh = Message(id="new", thread_id="here", role="assistant", content="stake them up")
    remembered = Message(id="old", thread_id="here", role="user", content="x", source="memory")
    recall.process_output_result([remembered, fresh], RequestContext("here", "ada"))
    assert recall.vector.describe_index(name).count == before + 1


def test_message_history(storage: InMemoryStorage) -> None:
    history = MessageHistory(storage=storage, last_messages=2)
    question = Message(id="q", thread_id="here", role="user", content="next", created_at=at(10))
    out = history.process_input([question], RequestContext("here", "ada"))
    assert [m.id for m in out] == ["h1", "h2", "q"]
    assert [m.source for m in out] == ["memory", "memory", None]
    answer = Message(id="a", thread_id="here", role="assistant", content="ok", created_at=at(11))
    history.process_output_result([*out, answer], RequestContext("here", "ada"))
    assert [m.id for m in storage.list_messages("here").items][-2:] == ["q", "a"]
    off = history.process_input([question], RequestContext("here", "ada", {"last_messages": False}))
    assert off == [question]


def test_history_creates_the_thread_or_says_why_not(storage: InMemoryStorage) -> None:
    history = MessageHistory(storage=storage)
    m = Message(id="n", thread_id="new-thread", role="user", content="hi")
    history.process_output_result([m], RequestContext("new-thread", "ada"))
    thread = storage.get_thread("new-thread")
    assert thread is not None and thread.resource_id == "ada"
    with pytest.raises(NotFoundError, match="no resource_id"):
        history.process_output_result(
            [Message(id="o", thread_id="orphan", role="user", content="hi")],
            RequestContext("orphan"),
        )


def test_an_agent_loop_with_memory() -> None:
    memory = Memory(
        "memory://", "memory://", "hash/128", {"last_messages": 4, "semantic_recall": {"top_k": 1}}
    )
    memory.create_thread("ada", thread_id="t1", title="Bikes")
    memory.create_thread("ada", thread_id="t2", title="Today")

    def turn(thread: str, text: str, reply: str, minute: int) -> list[Message]:
        context = RequestContext(thread, "ada")
        messages = [Message(thread_id=thread, role="user", content=text, created_at=at(minute))]
        for p in memory.processors:
            messages = p.process_input(messages, context)
        answer = Message(
            thread_id=thread, role="assistant", content=reply, created_at=at(minute + 0.5)
        )
        for p in memory.processors:
            p.process_output_result([*messages, answer], context)
        return messages

    turn("t1", "my bike chain keeps slipping", "try a new chain", 0)
    seen = turn("t2", "the chain on my bike again", "replace it", 10)
    assert seen[0].role == "system" and "my bike chain keeps slipping" in seen[0].text
    assert memory.recall("t2", per_page=10).total == 2


def test_render_is_utc_grouped_and_ordered() -> None:
    paris = timezone(timedelta(hours=1))
    messages = [
        Message(
            id="b",
            thread_id="t2",
            role="user",
            content="later",
            created_at=datetime(2024, 1, 16, 0, 10, tzinfo=paris),
        ),
        Message(
            id="a",
            thread_id="t1",
            role="user",
            content="first\nline",
            created_at=datetime(2024, 1, 15, 9, 0, tzinfo=UTC),
        ),
        Message(
            id="c",
            thread_id="t1",
            role="assistant",
            content="next day",
            created_at=datetime(2024, 1, 16, 9, 0, tzinfo=UTC),
        ),
    ]
    threads = {"t1": Thread(id="t1", resource_id="r", title="One")}
    assert render(messages, threads) == (
        "The following messages were remembered from other conversations:\n"
        "<remembered_from_other_conversation>\n"
        'Conversation "One", 2024-01-15:\n'
        "[09:00 UTC] User: first line\n"
        'Conversation "One", 2024-01-16:\n'
        "[09:00 UTC] Assistant: next day\n"
        'Conversation "t2", 2024-01-15:\n'
        "[23:10 UTC] User: later\n"
        "<end_remembered_from_other_conversation>"
    )


def test_merge_chronologically_keeps_input_order() -> None:
    def m(i: str, minute: int) -> Message:
        return Message(id=i, thread_id="t", role="user", content=i, created_at=at(minute))

    merged = merge_chronologically([m("a", 1), m("c", 3)], [m("d", 4), m("b", 2)])
    assert [x.id for x in merged] == ["a", "b", "c", "d"]
