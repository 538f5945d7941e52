"""Chunks fit the model's token limit, keep the text verbatim, and lose no token."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallstack.core.api.memory import Memory
from recallstack.core.contracts.embedder import Embedder, Tokenized
from recallstack.core.messages import Message
from recallstack.core.recall.chunking import chunk_text
from recallstack.core.vectors import Matrix
from recallstack.embedders.local import LocalEmbedder

LAST = {
    "latin": " Übrigens: meine Tochter ist allergisch gegen Erdnüsse.",
    "cyrillic": " Кстати, моя дочь страдает аллергией на арахис.",
    "cjk": "顺便说一下，我的女儿对花生过敏。",
    "code": "\n# note: my daughter is allergic to peanuts\n",
    "json": ', "note": "my daughter is allergic to peanuts"}',
    "urls": " https://allergy.example.org/daughter/peanuts?severity=high&since=2019",
}
"""Each family's last sentence, the one a cut-short chunk would silently drop."""

BODY = {
    "latin": "Die Straßenbahnhaltestelle gegenüber dem Hauptbahnhof wird ab Montag "
    "wegen Bauarbeiten verlegt, teilte die Verkehrsgesellschaft mit. ",
    "cyrillic": "Трамвайная остановка напротив главного вокзала с понедельника "
    "переносится из-за строительных работ, сообщила транспортная компания. ",
    "cjk": "火车站对面的电车站从星期一开始因施工而迁移，交通公司表示。",
    "code": "def handler(event: dict[str, object]) -> list[int]:\n"
    "    return [int(x) * 2 for x in event.get('values', []) if x is not None]\n",
    "json": '{"id": "3f2a9c1e-77b1-4f0a-9d1e-2b8c7e6a5d40", "ok": true, "n": 12345}, ',
    "urls": "https://example.com/api/v2/orders/98231?expand=items&locale=de_DE "
    "https://cdn.example.net/assets/img/2026/11/banner-hero@2x.webp ",
}


class BytesEmbedder(Embedder):
    """An embedder that does not know its tokenizer: the default byte bound counts."""

    model_id = "bytes"
    dimension = 1

    def embed(self, texts: Sequence[str]) -> Matrix:
        return np.ones((len(texts), 1), dtype=np.float32)


class WordEmbedder(BytesEmbedder):
    """A tokenizer of words and punctuation, for the pure chunking cases."""

    def token_offsets(self, text: str) -> Sequence[int]:
        return [m.start() for m in re.finditer(r"\w+|[^\w\s]", text)]


def texts(chunks: list[Tokenized]) -> list[str]:
    return [c.text for c in chunks]


def covers_every_token(text: str, chunks: list[str], offsets: Sequence[int]) -> bool:
    """Chunks are verbatim slices, in order, each starting inside or right after the one
    before, and every token that is not whitespace starts inside one. In a repetitive
    text ('000000000') a chunk matches at several places: each placement is tried."""
    needed = [o for o in offsets if not text[o].isspace()]

    def placed(n: int, at: int, end: int, covered: list[tuple[int, int]]) -> bool:
        if n == len(chunks):
            return all(any(a <= o < b for a, b in covered) for o in needed)
        chunk = chunks[n]
        last = len(text) - len(chunk) if n == 0 else min(end, len(text) - len(chunk))
        return any(
            text.startswith(chunk, start)
            and placed(
                n + 1, start + 1, start + len(chunk), [*covered, (start, start + len(chunk))]
            )
            for start in range(at, last + 1)
        )

    return placed(0, 0, 0, [])


# ---- the chunker on its own ---------------------------------------------------------


def test_cuts_after_sentences_and_keeps_the_text_verbatim() -> None:
    words = WordEmbedder()
    text = "One two three four five.  Six seven eight nine\n\n ten eleven. Twelve thirteen."
    chunks = texts(chunk_text(text, 8, words.tokenize))
    assert chunks == [
        "One two three four five.  ",
        "Six seven eight nine\n\n ten eleven. ",
        "Twelve thirteen.",
    ]
    assert all(len(words.token_offsets(c)) <= 8 for c in chunks)
    assert covers_every_token(text, chunks, words.token_offsets(text))


def test_consecutive_chunks_overlap() -> None:
    words = WordEmbedder()
    text = " ".join(f"w{i}" for i in range(40))
    chunks = texts(chunk_text(text, 10, words.tokenize, overlap=3))
    for a, b in itertools.pairwise(chunks):
        assert a.split()[-3:] == b.split()[:3]
    assert texts(chunk_text(text, 10, words.tokenize, overlap=0))[1].startswith("w10")


def test_short_and_blank_texts() -> None:
    words = WordEmbedder()
    assert texts(chunk_text("  a short one \n", 8, words.tokenize)) == ["  a short one \n"]
    assert texts(chunk_text(" \n\t ", 8, words.tokenize)) == []
    with pytest.raises(ValueError, match="at least 8"):
        texts(chunk_text("text", 4, words.tokenize))


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(
        st.characters(codec="utf-8", categories=("L", "N", "P", "Zs", "So", "Cc")), max_size=400
    ),
    max_tokens=st.integers(8, 40),
    overlap=st.integers(0, 30),
)
def test_any_text_any_limit(text: str, max_tokens: int, overlap: int) -> None:
    """With the byte bound (the default tokenizer) and with words: every chunk fits,
    and every token is in a chunk."""
    for embedder in (BytesEmbedder(), WordEmbedder()):
        chunks = texts(chunk_text(text, max_tokens, embedder.tokenize, overlap))
        assert all(len(embedder.token_offsets(c)) <= max_tokens for c in chunks)
        assert covers_every_token(text, chunks, embedder.token_offsets(text))
        assert (chunks == []) == (text.strip() == "")


# ---- the local model, script by script ----------------------------------------------


@pytest.fixture(scope="module")
def memory() -> Memory:
    return Memory("memory://", "memory://", LocalEmbedder(), {"semantic_recall": True})


def vectors_of(memory: Memory, text: str) -> Matrix:
    assert memory.semantic is not None
    message = Message(id="m", thread_id="t", role="user", content=text)
    return memory.semantic.embedder.embed(memory.semantic.chunks_of(message))


@pytest.mark.parametrize("family", sorted(LAST))
def test_no_token_is_dropped(memory: Memory, family: str) -> None:
    """Every chunk the model embeds fits its 256-token window (counted by the model's
    own tokenizer, special tokens included), and the last sentence changes the vectors."""
    assert memory.semantic is not None
    model = memory.semantic.embedder.embedder
    assert isinstance(model, LocalEmbedder)
    window = model._model.max_seq_length
    text = "".join(f"({i}) {BODY[family]}" for i in range(12)) + LAST[family]  # no repeats
    message = Message(id="m", thread_id="t", role="user", content=text)
    chunks = memory.semantic.chunks_of(message)
    assert len(chunks) > 1
    tokenizer = model._model.tokenizer
    assert all(len(tokenizer.encode(c).ids) <= window for c in chunks)  # specials included
    assert covers_every_token(text, chunks, model.token_offsets(text))
    with_last, without = vectors_of(memory, text), vectors_of(memory, text[: -len(LAST[family])])
    assert float((with_last @ without.T).max(axis=1).min()) < 0.999


def test_the_fact_at_the_end_of_a_log_line_is_recalled() -> None:
    """An 832-character log line whose last sentence is the only thing worth keeping."""
    log = (
        "2026-11-30T08:14:03.512Z INFO svc=checkout req=4f1c9a2e-77b1-4f0a-9d1e-2b8c7e6a5d40 "
        "path=/api/v2/orders/98231/items?expand=sku,price&locale=de_DE status=200 dur_ms=41 "
    ) * 5
    log = (
        log[: 832 - len("my daughter is allergic to peanuts")]
        + "my daughter is allergic to peanuts"
    )
    assert len(log) == 832
    with Memory("memory://", "memory://", LocalEmbedder(), {"semantic_recall": True}) as memory:
        memory.create_thread("ada", thread_id="t")
        memory.save_messages(
            [
                Message(id="log", thread_id="t", role="user", content=log),
                Message(id="tram", thread_id="t", role="user", content=BODY["latin"]),
                Message(id="code", thread_id="t", role="user", content=BODY["code"]),
                Message(id="order", thread_id="t", role="user", content="Order 98231 shipped."),
            ]
        )
        hits = memory.recall("t", vector_search_string="what is my daughter allergic to?").hits
        assert hits[0].message_id == "log"


# ---- a chunk is tokenized once ------------------------------------------------------


class CountingTokenizer:
    """The local model's tokenizer, counting the texts it encodes."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.texts = tokenizer, 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.tokenizer, name)
        if name not in ("encode", "encode_batch"):
            return method

        def counted(value: Any, *args: Any, **kwargs: Any) -> Any:
            self.texts += len(value) if name == "encode_batch" else 1
            return method(value, *args, **kwargs)

        return counted


def test_a_saved_chunk_and_a_query_are_tokenized_once() -> None:
    model = LocalEmbedder()
    counting = CountingTokenizer(model._model.tokenizer)
    model._model = dataclasses.replace(model._model, tokenizer=counting)
    texts = [f"note {i}: the temples of Kyoto in autumn, and the market" for i in range(20)]
    with Memory("memory://", "memory://", model, {"semantic_recall": True}) as memory:
        memory.create_thread("ada", thread_id="t")
        memory.save_messages(
            [
                Message(id=f"m{i}", thread_id="t", role="user", content=t)
                for i, t in enumerate(texts)
            ]
        )
        assert counting.texts == 2 * len(texts)  # each text, and its contextual text
        memory.recall("t", vector_search_string="autumn temples")
        assert counting.texts == 2 * len(texts) + 1
        assert memory.semantic is not None
        stored = memory.semantic.vector.get(memory.semantic.index_name(), ["m3"])
    fresh = LocalEmbedder().embed([texts[3]])[0]  # the texts embedded without tokens
    assert np.allclose(stored[0].vector, fresh, atol=1e-6)


def test_embedding_tokenized_inputs_equals_embedding_their_texts() -> None:
    model = LocalEmbedder()
    texts = ["hello world.", "Kyoto temples in autumn", "数据库里的记忆", "x" * 40]
    by_text = model.embed(texts)
    by_tokens = model.embed_tokenized([model.tokenize(t) for t in texts])
    assert np.allclose(by_text, by_tokens, atol=1e-6)
