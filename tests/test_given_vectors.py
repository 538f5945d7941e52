"""`save_messages(vectors=...)`: a save that writes vectors it is given instead of embedding
them (how `migrate` and `import` copy a memory), each checked before anything is written."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest

from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.api.memory import Memory
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.vectors import EVERYWHERE
from recallstack.embedders.hashing import HashEmbedder

DIMENSION = 64


def memory() -> Memory:
    return Memory(
        InMemoryStorage(),
        InMemoryVectorStore(),
        HashEmbedder(dimension=DIMENSION),
        {"semantic_recall": {"top_k": 3, "scope": "resource"}},
    )


def messages() -> list[Message]:
    return [
        Message(id=f"m{i}", thread_id="t", role="user", content=f"note number {i}")
        for i in range(3)
    ]


def unit(k: int) -> list[float]:
    vector = [0.0] * DIMENSION
    vector[k] = 1.0
    return vector


def test_given_vectors_are_written_and_the_rest_embedded() -> None:
    with memory() as mem:
        mem.create_thread("ada", thread_id="t")
        saved = mem.save_messages(messages(), vectors={"m0": unit(0), "m1": unit(1)})
        assert saved.indexed == ["m0", "m1", "m2"]
        assert mem.semantic is not None
        store, name = mem.semantic.vector, mem.semantic.index_name()
        hits = store.query(name, unit(1), 1, include_vector=True, partition=EVERYWHERE)
        assert hits[0].id == "m1" and hits[0].vector == pytest.approx(unit(1))
        embedded = mem.semantic.embedder.embedder.embed(["note number 2"])[0]
        third = store.query(name, embedded, 1, partition=EVERYWHERE)
        assert third[0].id == "m2" and third[0].score == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("vector", "says"),
    [
        (unit(0)[:-1], "dimension"),
        ([math.nan] * DIMENSION, "NaN"),
        ([0.0] * DIMENSION, "zero"),
        ("text", "list of numbers"),
    ],
)
def test_a_bad_vector_is_refused_by_its_chunk_id_and_nothing_is_written(
    vector: Any, says: str
) -> None:
    with memory() as mem:
        mem.create_thread("ada", thread_id="t")
        with pytest.raises(InvalidInputError, match=rf"vectors\['m1'\].*{says}|{says}.*m1"):
            mem.save_messages(messages(), vectors={"m0": unit(0), "m1": vector})
        assert mem.storage.get_messages(["m0", "m1", "m2"]) == []
        assert mem.vector is not None and mem.vector.list_indexes() == []


def test_vectors_without_an_embedder_are_refused() -> None:
    with Memory(InMemoryStorage(), InMemoryVectorStore()) as mem:
        mem.create_thread("ada", thread_id="t")
        with pytest.raises(InvalidInputError, match="no embedder"):
            mem.save_messages(messages(), vectors={"m0": unit(0)})
        assert mem.storage.get_messages(["m0"]) == []


def test_async_memory_takes_them_too() -> None:
    async def main() -> None:
        async with AsyncMemory(
            InMemoryStorage(),
            InMemoryVectorStore(),
            HashEmbedder(dimension=DIMENSION),
            {"semantic_recall": True},
        ) as mem:
            await mem.create_thread("ada", thread_id="t")
            await mem.save_messages(messages(), vectors={"m0": np.asarray(unit(5))})
            assert mem.semantic is not None
            hit = mem.semantic.vector.query(
                mem.semantic.index_name(), unit(5), 1, partition=EVERYWHERE
            )
            assert hit[0].id == "m0" and hit[0].score == pytest.approx(1.0)

    asyncio.run(main())
