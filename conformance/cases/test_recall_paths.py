"""Group 7: `Memory.recall` and the processors are one recall path.

Over the demo conversation (one user, four earlier threads, a new one with
history), every question of its set, in both scopes and with several
`top_k`/`message_range`: the processors hand the model exactly the messages
of `Memory.recall(...).context` followed by the new user message, on the
backend as storage and as vector store.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import recallstack
from recallstack.core.api.memory import Memory
from recallstack.core.contracts.processor import RequestContext
from recallstack.core.messages import Message

DATA = json.loads((Path(recallstack.__file__).parent / "demo_conversation.json").read_text())
CONFIGS: list[dict[str, Any]] = [
    {"top_k": 3, "message_range": 1, "scope": "resource"},
    {"top_k": 5, "message_range": {"before": 2, "after": 0}, "scope": "resource"},
    {"top_k": 2, "message_range": 0, "scope": "thread"},
]


def _seed(memory: Memory, resource: str) -> str:
    """The demo's threads under `resource`, and today's thread with two messages."""
    for thread in DATA["threads"]:
        thread_id = f"{resource}-{thread['id']}"
        memory.create_thread(resource, thread_id=thread_id, title=thread["title"])
        memory.save_messages(
            [
                Message(**{**m, "id": f"{resource}-{m['id']}"}, thread_id=thread_id)
                for m in thread["messages"]
            ]
        )
    today = f"{resource}-{DATA['today']['id']}"
    memory.create_thread(resource, thread_id=today, title=DATA["today"]["title"])
    start = datetime(2024, 6, 1, 9, tzinfo=UTC)
    memory.save_messages(
        [
            Message(
                id=f"{today}-0",
                thread_id=today,
                role="user",
                content="Good morning!",
                created_at=start,
            ),
            Message(
                id=f"{today}-1",
                thread_id=today,
                role="assistant",
                content="Morning! How is the sourdough starter doing?",
                created_at=start + timedelta(minutes=1),
            ),
        ]
    )
    return today


def _unseed(owner: Any, resource: str) -> None:
    """Delete the threads `_seed` made, through a memory or a storage."""
    for thread in [*DATA["threads"], DATA["today"]]:
        owner.delete_thread(f"{resource}-{thread['id']}")


def _agree(memory: Memory, resource: str) -> None:
    today = _seed(memory, resource)
    asked = datetime(2024, 6, 1, 9, 5, tzinfo=UTC)
    for config in CONFIGS:
        overrides = {"last_messages": 4, "semantic_recall": config}
        for query in DATA["queries"]:
            question = Message(
                id=f"{today}-q",
                thread_id=today,
                role="user",
                content=query["text"],
                created_at=asked,
            )
            context = RequestContext(today, resource, overrides)
            messages = [question]
            for processor in memory.processors:
                messages = processor.process_input(messages, context)
            recalled = memory.recall(today, resource, query["text"], thread_config=overrides)
            assert recalled.hits, query["text"]
            assert messages == [*recalled.context, question], (config, query["text"])
            in_context = {m.id for m in recalled.context if m.role != "system"}
            elsewhere = {m.id for m in recalled.messages if m.thread_id != today}
            assert {m.id for m in recalled.messages} == in_context | elsewhere


def test_one_recall_path_over_the_vector_store(memory_over_vector: Memory) -> None:
    _agree(memory_over_vector, "paths-vector")


def test_one_recall_path_over_storage(memory_over_storage: Memory, ids: Any) -> None:
    resource = ids("paths")
    _agree(memory_over_storage, resource)
    _unseed(memory_over_storage, resource)


HYBRID: dict[str, Any] = {"semantic_recall": {"top_k": 8, "hybrid": {"context": 1}}}


def test_hybrid_recall_with_context_agrees_with_the_reference(
    opened_storage: Any, ids: Any, memory_api: Any
) -> None:
    """Hybrid recall with contextual vectors reads the storage's keyword search and its
    messages before each saved one: over the demo conversation, every question finds
    the reference storage's hits, in its order, with its fused and per-signal scores."""
    from recallstack.adapters.memory.storage import InMemoryStorage
    from recallstack.adapters.memory.vector import InMemoryVectorStore
    from recallstack.embedders.hashing import HashEmbedder

    resource = ids("hybrid")
    memory = memory_api(opened_storage, InMemoryVectorStore(), HashEmbedder(32), HYBRID)
    reference = memory_api(InMemoryStorage(), InMemoryVectorStore(), HashEmbedder(32), HYBRID)
    for each in (memory, reference):
        _seed(each, resource)
    signals: set[str] = set()
    for query in DATA["queries"]:
        got, want = (each.search(resource, query["text"]) for each in (memory, reference))
        assert [h.message.id for h in got] == [h.message.id for h in want], query["text"]
        for g, w in zip(got, want, strict=True):
            for score in ("score", "dense_score", "keyword_score", "context_score"):
                expected, actual = getattr(w, score), getattr(g, score)
                if expected is None:
                    assert actual is None, (query["text"], score)
                else:
                    assert actual == pytest.approx(expected, abs=1e-6), (query["text"], score)
                    signals.add(score)
    assert signals == {"score", "dense_score", "keyword_score", "context_score"}
    _unseed(opened_storage, resource)
