"""Group 11: the resource is the security boundary.

A property test over Memory on the backend: random interleavings of saves,
thread updates, recalls in both scopes with neighbours (hybrid ones too,
where the storage has keyword search), searches, listings, deletes and
reindexes made for resource A, many of them naming B's thread and message ids
or passing hostile ids. Whatever A does, nothing of B's is returned, changed
or deleted: B's threads, messages and vectors are compared with a snapshot
after every step. (Deleting by message id is global by design, so deletes
name A's messages only.)
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallstack.core.api.memory import Memory
from recallstack.core.errors import InvalidInputError, NotFoundError
from recallstack.core.messages import Message
from recallstack.core.vectors import EVERYWHERE

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = ["lisbon", "hotel", "river", "pasta", "garlic", "train", "museum", "coffee"]
HOSTILE: list[Any] = [{"$ne": "x"}, {"$in": ["a", "b"]}, ["b"], 7, "", "x" * 600, "a\x00b"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("steal_thread"), st.integers(0, 1), st.none()),
        st.tuples(st.just("update_thread"), st.integers(0, 1), st.sampled_from(WORDS)),
        st.tuples(
            st.just("recall"),
            st.sampled_from(["thread", "resource"]),
            st.tuples(st.sampled_from(WORDS), st.integers(1, 8), st.integers(0, 2), st.booleans()),
        ),
        st.tuples(
            st.just("search"), st.booleans(), st.tuples(st.sampled_from(WORDS), st.integers(1, 8))
        ),
        st.tuples(st.just("hostile"), st.sampled_from(range(len(HOSTILE))), st.none()),
        st.tuples(st.just("delete"), st.integers(0, 5), st.none()),
        st.tuples(st.just("list"), st.none(), st.none()),
        st.tuples(st.just("reindex"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=8,
)


class Tenants:
    """Resources A and B with two threads each, over one Memory."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        prefix = f"iso_{uuid.uuid4().hex[:8]}_"
        self.a, self.b = prefix + "A", prefix + "B"
        self.threads = {r: [f"{r}-t{k}" for k in range(2)] for r in (self.a, self.b)}
        self.count = 0
        for r in (self.a, self.b):
            for t in self.threads[r]:
                memory.create_thread(r, thread_id=t, metadata={"owner": r})
                memory.save_messages([self.message(t, f"{t}-m{k}") for k in range(3)])

    def message(self, thread_id: str, message_id: str) -> Message:
        self.count += 1
        words = " ".join(WORDS[(self.count + k) % len(WORDS)] for k in range(3))
        return Message(
            id=message_id,
            thread_id=thread_id,
            role="user" if self.count % 2 else "assistant",
            content=f"{words} {self.count}",
            created_at=T0 + timedelta(minutes=self.count),
        )

    def ids_of(self, resource: str) -> list[str]:
        return [
            m.id for t in self.threads[resource] for m in self.memory.storage.list_messages(t).items
        ]

    def snapshot(self, resource: str) -> Any:
        """Everything stored of a resource: threads, messages, vectors."""
        storage = self.memory.storage
        threads = [t.model_dump() for t in storage.list_threads(resource).items]
        messages = sorted(
            m.model_dump_json()
            for t in self.threads[resource]
            for m in storage.list_messages(t).items
        )
        semantic = self.memory.semantic
        assert semantic is not None
        probe = np.ones(semantic.embedder.embedder.dimension, dtype=np.float32)
        hits = semantic.vector.query(
            semantic.index_name(),
            probe,
            1_000,
            filter={"resource_id": resource},
            partition=EVERYWHERE,
        )
        vectors = sorted((h.id, repr(sorted(h.metadata.items()))) for h in hits)
        return threads, messages, vectors

    def run(self, op: tuple[str, Any, Any]) -> None:
        """One call made for A (or with a hostile id); refused calls must say so."""
        kind, x, y = op
        memory, a, b = self.memory, self.a, self.b
        if kind == "save":
            own, theirs = self.threads[a][x % 2], self.ids_of(b)
            target = theirs[x % len(theirs)] if y else f"{own}-new{self.count}"
            try:
                memory.save_messages([self.message(own, target)])
            except InvalidInputError:
                assert y, "saving a new message of A's was refused"
        elif kind == "steal_thread":
            with pytest.raises(InvalidInputError):
                memory.create_thread(a, thread_id=self.threads[b][x], title="stolen")
        elif kind == "update_thread":
            memory.update_thread(self.threads[a][x], metadata={"owner": a, "topic": y})
        elif kind == "recall":
            word, top_k, span, hybrid = y
            recall = {"scope": x, "top_k": top_k, "message_range": span}
            if hybrid and memory.storage.keyword_search:  # the keyword signal, from storage
                recall["hybrid"] = {"candidates": 20}
            result = memory.recall(
                self.threads[a][0],
                resource_id=a,
                vector_search_string=word,
                thread_config={"semantic_recall": recall},
            )
            assert all(m.resource_id == a for m in result.messages), "recall crossed resources"
            assert {h.message_id for h in result.hits} <= set(self.ids_of(a))
        elif kind == "search":
            word, top_k = y
            if x:  # naming B's thread is refused
                with pytest.raises(NotFoundError):
                    memory.search(a, word, top_k=top_k, thread_id=self.threads[b][0])
            found = memory.search(a, word, top_k=top_k)
            assert {h.message.id for h in found} <= set(self.ids_of(a)), "search crossed resources"
        elif kind == "hostile":
            with pytest.raises(InvalidInputError):
                memory.recall(self.threads[a][0], resource_id=HOSTILE[x], vector_search_string="x")
        elif kind == "delete":
            mine = self.ids_of(a)
            if mine:
                memory.delete_messages([mine[x % len(mine)]])
        elif kind == "list":
            assert {t.resource_id for t in memory.list_threads(a).items} == {a}
        else:
            assert memory.reindex().failed == 0


def _check(memory: Memory, steps: list[tuple[str, Any, Any]]) -> None:
    tenants = Tenants(memory)
    before = tenants.snapshot(tenants.b)
    for step in steps:
        tenants.run(step)
        assert tenants.snapshot(tenants.b) == before, f"B changed after {step}"
    for r in (tenants.a, tenants.b):
        for t in tenants.threads[r]:
            memory.delete_thread(t)


PROPERTY = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(steps=ops)
def test_one_resource_never_reaches_another_through_the_vector_store(
    memory_over_vector: Memory, steps: list[tuple[str, Any, Any]]
) -> None:
    _check(memory_over_vector, steps)


@PROPERTY
@given(steps=ops)
def test_one_resource_never_reaches_another_through_storage(
    memory_over_storage: Memory, steps: list[tuple[str, Any, Any]]
) -> None:
    _check(memory_over_storage, steps)
