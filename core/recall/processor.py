"""SemanticRecall: the processor that embeds saved messages and recalls similar ones with
their neighbours.

Usable on its own in any agent loop (`process_input` before the model call,
`process_output_result` after it) or through `Memory`, which builds it and
runs the same steps for `Memory.recall`. Its jobs are indexing
(`indexing.py`) and retrieval (`retrieval.py`); this class holds their
configuration and runs them. Behaviour: docs/spec/semantic-recall.md.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from recallstack.core.contracts.embedder import Embedder
from recallstack.core.contracts.processor import RequestContext
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.recall.indexes import (
    context_index,
    existing_indexes,
    main_index,
    own_indexes,
)
from recallstack.core.recall.indexing import Indexing, chunks_of
from recallstack.core.recall.records import Hit, IndexReport, Recalled
from recallstack.core.recall.retrieval import Retrieval, merge
from recallstack.core.records import Thread
from recallstack.core.runtime.config import MemoryConfig, SemanticRecallConfig, fitted
from recallstack.core.runtime.embedding_cache import CachedEmbedder
from recallstack.core.vectors import Matrix


class SemanticRecall:
    """Input and output processor `semantic-recall`.

    `options` are `SemanticRecallConfig` fields (`top_k=4, message_range=1,
    scope="resource", ...`). `Memory` passes its whole `MemoryConfig` as
    `config` instead, so that both read one configuration object.

    Its methods are blocking code; `AsyncMemory` runs the same methods on the event
    loop or in a worker thread (`core/runtime/awaiting.py`).
    """

    id = "semantic-recall"
    name = "SemanticRecall"

    def __init__(
        self,
        *,
        storage: Storage,
        vector: VectorStore,
        embedder: Embedder | CachedEmbedder,
        config: MemoryConfig | None = None,
        logger: logging.Logger | None = None,
        cache_size: int = 4096,
        **options: Any,
    ) -> None:
        if config is not None and options:
            raise InvalidInputError("SemanticRecall: pass config= or its options, not both")
        self.storage = storage
        self.vector = vector
        self.embedder = (
            embedder
            if isinstance(embedder, CachedEmbedder)
            else CachedEmbedder(embedder, cache_size)
        )
        self.config = fitted(
            config or MemoryConfig(semantic_recall=SemanticRecallConfig.model_validate(options)),
            storage.keyword_search,
        )
        self.log = logger or logging.getLogger("recallstack.semantic_recall")
        self.indexing = Indexing(storage, vector, self.embedder, self.log)
        self.retrieval = Retrieval(storage, vector, self.embedder)

    def _config(self, config: SemanticRecallConfig | None) -> SemanticRecallConfig:
        return config or self.config.recall_or_default

    # ---- where the vectors are ---------------------------------------------------

    def index_name(self, config: SemanticRecallConfig | None = None) -> str:
        """The one index name every read and write path uses."""
        return main_index(self._config(config), self.embedder.embedder)

    def context_index_name(self, config: SemanticRecallConfig | None = None) -> str | None:
        """The index of contextual vectors, if `config` has them (`HybridConfig.context`)."""
        return context_index(self._config(config), self.embedder.embedder)

    def own_index_names(self, config: SemanticRecallConfig | None = None) -> set[str]:
        """The indexes this memory writes with `config`: it can re-embed their vectors."""
        return own_indexes(self._config(config), self.embedder.embedder)

    def index_names(self) -> list[str]:
        """Indexes that may hold this memory's vectors: those recorded in storage and
        its own, where they exist."""
        config = self.config.recall_or_default
        return existing_indexes(self.storage, self.vector, config, self.embedder.embedder)

    def chunks_of(self, message: Message, config: SemanticRecallConfig | None = None) -> list[str]:
        """What is embedded of a message: its text's chunks; none of a system message."""
        return [c.text for c in chunks_of(self.embedder, message, self._config(config))]

    # ---- indexing and retrieval -------------------------------------------------------

    def index(
        self,
        messages: Sequence[Message],
        config: SemanticRecallConfig | None = None,
        new: Collection[str] = (),
        threads: Mapping[str, Thread] | None = None,
        known: Mapping[str, Matrix] | None = None,
    ) -> IndexReport:
        """`Indexing.index`: write messages' vectors, then record them as indexed."""
        return self.indexing.index(messages, self._config(config), new, threads, known)

    def search(
        self,
        query: str,
        thread_id: str | None,
        resource_id: str | None,
        config: SemanticRecallConfig | None = None,
    ) -> list[Hit]:
        """`Retrieval.search`: the top_k messages most similar to the query."""
        return self.retrieval.search(query, thread_id, resource_id, self._config(config))

    def recall(
        self,
        query: str,
        thread_id: str,
        resource_id: str | None,
        config: SemanticRecallConfig | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> Recalled:
        """`Retrieval.recall`: the hits and their neighbours. Raises."""
        config = self._config(config)
        return self.retrieval.recall(query, thread_id, resource_id, config, exclude)

    # ---- the processor ---------------------------------------------------------------

    def process_input(self, messages: list[Message], context: RequestContext) -> list[Message]:
        """Add what the last user message recalls. Fails open: errors are logged."""
        try:
            return self._add_recalled(messages, context)
        except Exception:
            self.log.exception("semantic recall failed; the input goes on unchanged")
            return messages

    def process_output_result(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """Index the new messages (not those memory added). Failures are logged."""
        config = self.config.merged(context.config).semantic_recall
        if config:
            self.indexing.index([m for m in messages if m.source is None], config)
        return messages

    def _add_recalled(self, messages: list[Message], context: RequestContext) -> list[Message]:
        config = self.config.merged(context.config).semantic_recall
        query = next((m.text for m in reversed(messages) if m.role == "user"), "")
        if not config or not query.strip():
            return messages
        resource_id = context.resource_id
        if resource_id is None and config.scope == "resource":
            thread = self.storage.get_thread(context.thread_id)
            resource_id = thread.resource_id if thread else None
        recalled = self.retrieval.recall(
            query, context.thread_id, resource_id, config, exclude={m.id for m in messages}
        )
        return merge(self.storage, messages, recalled.messages, context.thread_id)
