"""recallstack.integrations.langchain against LangChain's own standard tests
(langchain-tests), on memory://, LibSQL and Postgres, and what they do not cover:
portable filters and the reserved metadata keys. Run by `nox -s integration-langchain`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    VectorStoreIntegrationTests,
)
from langchain_tests.unit_tests import EmbeddingsUnitTests

from recallstack.core.errors import InvalidInputError
from recallstack.integrations.langchain import RecallstackEmbeddings, RecallstackVectorStore


class OnTheHashEmbedder:
    @property
    def embeddings_class(self) -> type[RecallstackEmbeddings]:
        return RecallstackEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": "hash/32"}


class TestEmbeddingsUnit(OnTheHashEmbedder, EmbeddingsUnitTests):
    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return {"RECALLSTACK_EMBEDDER": "hash/24"}, {}, {"model_id": "hash-24"}


class TestEmbeddingsIntegration(OnTheHashEmbedder, EmbeddingsIntegrationTests):
    pass


def opened(url: str) -> Iterator[RecallstackVectorStore]:
    store = RecallstackVectorStore(url, VectorStoreIntegrationTests.get_embeddings())
    yield store
    store.close()


class TestOnMemory(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Iterator[RecallstackVectorStore]:  # type: ignore[override]
        yield from opened("memory://")


class TestOnLibSQL(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[RecallstackVectorStore]:  # type: ignore[override]
        yield from opened(f"libsql:///{tmp_path / 'lc.db'}")


class TestOnPostgres(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, pg_url: str) -> Iterator[RecallstackVectorStore]:  # type: ignore[override]
        yield from opened(pg_url)


@pytest.fixture(params=["memory", "libsql", "pg"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecallstackVectorStore]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "libsql":
        url = f"libsql:///{tmp_path / 'lc.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    yield from opened(url)


def test_filters_are_the_same_on_every_backend(store: RecallstackVectorStore) -> None:
    docs = [
        Document(page_content=f"note {n}", metadata={"n": n, "tags": ["a", "b"][: n % 3]})
        for n in range(12)
    ]
    store.add_documents(docs, ids=[f"d{n}" for n in range(12)])
    found = store.similarity_search("note", k=12, filter={"n": {"$gte": 4}, "tags": "b"})
    assert sorted(d.metadata["n"] for d in found) == [5, 8, 11]
    scored = store.similarity_search_with_relevance_scores("note 3", k=3)
    assert all(0.0 <= score <= 1.0 for _, score in scored)


def test_the_reserved_keys_are_refused_before_anything_is_written(
    store: RecallstackVectorStore,
) -> None:
    with pytest.raises(InvalidInputError, match="lc_text"):
        store.add_texts(["a", "b"], [{}, {"lc_text": "mine"}], ids=["1", "2"])
    assert store.get_by_ids(["1", "2"]) == []


def test_from_texts_and_get_by_ids_keep_the_order_asked() -> None:
    store = RecallstackVectorStore.from_texts(
        ["alpha", "beta", "gamma"],
        RecallstackEmbeddings("hash/256"),
        [{"k": 1}, {"k": 2}, {"k": 3}],
        ids=["a", "b", "c"],
    )
    assert [d.id for d in store.get_by_ids(["c", "missing", "a"])] == ["c", "a"]
    assert store.similarity_search("beta", k=1)[0].metadata == {"k": 2}
