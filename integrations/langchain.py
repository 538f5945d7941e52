"""LangChain: any recallstack embedder as `Embeddings`, any recallstack vector store as a
`VectorStore`, with recallstack's Mongo-style filters, the same on every backend.

Needs the `langchain` extra (langchain-core). A document's text and id ride in
its vector's metadata under `lc_text` and `lc_id`, which its own metadata may
not use.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from recallstack.integrations import missing

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore as LangChainVectorStore
except ImportError as exc:
    raise missing("langchain", exc, "langchain") from exc

from recallstack.core.batching import batched
from recallstack.core.contracts.embedder import Embedder
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import InvalidInputError
from recallstack.core.runtime.engine import EMBEDDER_ENV
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE, Metric, QueryResult

DEFAULT_EMBEDDER = "local/all-MiniLM-L6-v2"
TEXT, ID = "lc_text", "lc_id"
"""The metadata keys that carry a document's text and id."""


class RecallstackEmbeddings(Embeddings):
    """A recallstack embedder (an `Embedder` or a name such as `hash/64` or
    `local/all-MiniLM-L6-v2`; default `$RECALLSTACK_EMBEDDER`, then the local model)
    as LangChain `Embeddings`; the async methods await `Embedder.aembed`."""

    def __init__(self, embedder: Embedder | str | None = None) -> None:
        if isinstance(embedder, Embedder):
            self.embedder = embedder
        else:
            spec = embedder or os.environ.get(EMBEDDER_ENV) or DEFAULT_EMBEDDER
            self.embedder = registry().embedder(spec)
        self.model_id = self.embedder.model_id

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in await self.embedder.aembed(texts)]

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.aembed_documents([text]))[0]


class RecallstackVectorStore(LangChainVectorStore):
    """A recallstack vector store (an object or a URL such as `memory://`,
    `libsql:///file.db`, `postgresql://...`) as a LangChain `VectorStore`: documents
    go in the index `index`, made on the first add with the embeddings' size.
    `filter=` takes recallstack's filter language (docs/spec/backends.md §5)."""

    def __init__(
        self,
        store: VectorStore | str,
        embedding: Embeddings,
        *,
        index: str = "langchain",
        metric: Metric = "cosine",
    ) -> None:
        self.store = store if isinstance(store, VectorStore) else registry().vector_store(store)
        self._owns_store = not isinstance(store, VectorStore)
        self.embedding = embedding
        self.index = index
        self.metric = metric

    @property
    def embeddings(self) -> Embeddings:
        return self.embedding

    def close(self) -> None:
        """Close the store when it was opened from a URL."""
        if self._owns_store:
            self.store.close()

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        store: VectorStore | str = "memory://",
        index: str = "langchain",
        **kwargs: Any,
    ) -> RecallstackVectorStore:
        made = cls(store, embedding, index=index, **kwargs)
        made.add_texts(texts, metadatas, ids=ids)
        return made

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and upsert; `ids` may hold None for documents without one
        (`add_documents` passes them so), which get a new UUID."""
        texts = list(texts)
        if not texts:
            return []
        given: list[str | None] = list(ids) if ids is not None else [None] * len(texts)
        if len(given) != len(texts) or (metadatas is not None and len(metadatas) != len(texts)):
            raise InvalidInputError("add_texts: ids and metadatas must match the texts in length")
        chosen = [i if i is not None else str(uuid.uuid4()) for i in given]
        metadata = []
        for n, (text, doc_id) in enumerate(zip(texts, chosen, strict=True)):
            own = dict(metadatas[n]) if metadatas is not None else {}
            if TEXT in own or ID in own:
                raise InvalidInputError(
                    f"add_texts: metadatas[{n}] uses {TEXT!r} or {ID!r}, which carry the "
                    "document's text and id"
                )
            metadata.append({**own, TEXT: text, ID: doc_id})
        vectors = self.embedding.embed_documents(texts)
        self.store.create_index(self.index, len(vectors[0]), metric=self.metric)
        return self.store.upsert(self.index, chosen, vectors, metadata, partition=EVERYWHERE)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the documents with these ids (unknown ids are ignored)."""
        if not ids:
            raise InvalidInputError("delete: give the ids of the documents to delete")
        if self.index in self.store.list_indexes():
            self.store.delete(self.index, ids=list(ids), partition=EVERYWHERE)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        if not ids or self.index not in self.store.list_indexes():
            return []
        dimension = self.store.describe_index(self.index).dimension
        probe = [1.0] * dimension  # any vector: every match is returned
        limits = self.store.capabilities
        found: list[Document] = []
        for group in batched(list(ids), min(limits.max_filter_values, limits.max_top_k)):
            hits = self.store.query(
                self.index, probe, len(group), filter={ID: {"$in": group}}, partition=EVERYWHERE
            )
            found += [_document(h) for h in hits]
        order = {doc_id: n for n, doc_id in enumerate(ids)}
        return sorted(found, key=lambda d: order[str(d.id)])

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        vector = self.embedding.embed_query(query)
        return [(_document(h), h.score) for h in self._query(vector, k, filter)]

    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter)]

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return [_document(h) for h in self._query(embedding, k, filter)]

    def _query(
        self, vector: list[float], k: int, filter: dict[str, Any] | None
    ) -> list[QueryResult]:
        if self.index not in self.store.list_indexes():
            return []
        return self.store.query(self.index, vector, k, filter=filter, partition=EVERYWHERE)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """LangChain's relevance, in [0, 1], from recallstack's scores (higher is better:
        cosine in [-1, 1], euclidean already in (0, 1], an unbounded inner product)."""
        if self.metric == "cosine":
            return lambda score: (score + 1.0) / 2.0
        if self.metric == "euclidean":
            return lambda score: score
        return lambda score: 1.0 / (1.0 + math.exp(-score))


def _document(hit: QueryResult) -> Document:
    metadata = {k: v for k, v in hit.metadata.items() if k not in (TEXT, ID)}
    return Document(page_content=str(hit.metadata[TEXT]), metadata=metadata, id=hit.id)
