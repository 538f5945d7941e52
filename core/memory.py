"""Memory: threads, messages, recall and reindexing over one storage, vector store and embedder."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from recallstack.core.calls import run
from recallstack.core.config import MemoryConfig
from recallstack.core.embedder import Embedder
from recallstack.core.errors import InvalidInputError
from recallstack.core.message_history import MessageHistory
from recallstack.core.messages import Message
from recallstack.core.operations import (
    Operations,
    RecallResult,
    ReindexResult,
    SaveResult,
    SearchHit,
    ThreadUpdateResult,
)
from recallstack.core.processor import Processor
from recallstack.core.records import Resource, Thread, ThreadPage
from recallstack.core.registry import registry
from recallstack.core.semantic_recall import SemanticRecall
from recallstack.core.storage import Storage
from recallstack.core.vector_store import VectorStore

if TYPE_CHECKING:
    from recallstack.core.doctor import Checkup

DEFAULT_URL = "libsql:///local.db"
STORAGE_ENV, VECTOR_ENV, EMBEDDER_ENV = (
    "RECALLSTACK_STORAGE",
    "RECALLSTACK_VECTOR",
    "RECALLSTACK_EMBEDDER",
)
"""The variables `Memory.from_env()` and the CLI read."""


def backends_from_env() -> tuple[str | None, str | None, str | None]:
    """The storage, vector store and embedder the environment names (None: the default)."""
    storage, vector, embedder = (
        os.environ.get(v) or None for v in (STORAGE_ENV, VECTOR_ENV, EMBEDDER_ENV)
    )
    return storage, vector, embedder


class Memory:
    """Long-term conversational memory.

    `storage` and `vector` are objects or URLs (both default to LibSQL at
    ./local.db); `embedder` is an `Embedder` or a `provider/model` string.
    `options` is a `MemoryConfig` or its dict form, e.g.
    `{"last_messages": 10, "semantic_recall": {"top_k": 4, "scope": "resource"}}`.
    """

    def __init__(
        self,
        storage: Storage | str | None = None,
        vector: VectorStore | str | None = None,
        embedder: Embedder | str | None = None,
        options: MemoryConfig | Mapping[str, Any] | None = None,
        *,
        logger: logging.Logger | None = None,
    ) -> None:
        self.config = MemoryConfig.model_validate(options or {})
        self._opened: list[Storage | VectorStore] = []
        """What this memory opened from URLs, and so closes; never what the caller passed."""
        self._built: Embedder | None = None
        """The embedder this memory built from a name, and so closes."""
        try:
            self._build(storage, vector, embedder, logger)
        except BaseException:
            self.close()
            raise

    def _build(
        self,
        storage: Storage | str | None,
        vector: VectorStore | str | None,
        embedder: Embedder | str | None,
        logger: logging.Logger | None,
    ) -> None:
        if isinstance(embedder, str):  # first: a bad name is refused before a file is made
            self._built = registry().embedder(embedder)
        if isinstance(storage, Storage):
            self.storage = storage
        else:
            self.storage = registry().storage(storage or DEFAULT_URL)
            self._opened.append(self.storage)
        self.history = MessageHistory(storage=self.storage, config=self.config)
        self.semantic: SemanticRecall | None = None
        self.vector: VectorStore | None = None
        """The vector store; without an embedder, the one given (or the default, beside
        the default storage), so that deletes and edits reach vectors others wrote."""
        if embedder is None and self.config.semantic_recall:
            raise InvalidInputError(
                "semantic recall needs an embedder, e.g. 'local/all-MiniLM-L6-v2'"
            )
        if isinstance(vector, VectorStore):
            self.vector = vector
        elif embedder is not None or vector is not None or storage in (None, DEFAULT_URL):
            self.vector = registry().vector_store(vector or DEFAULT_URL)
            self._opened.append(self.vector)
        if embedder is None or self.vector is None:
            return
        model = embedder if isinstance(embedder, Embedder) else self._built
        assert model is not None
        self.semantic = SemanticRecall(
            storage=self.storage,
            vector=self.vector,
            embedder=model,
            config=self.config,
            logger=logger,
        )

    @classmethod
    def from_env(
        cls,
        options: MemoryConfig | Mapping[str, Any] | None = None,
        *,
        logger: logging.Logger | None = None,
    ) -> Memory:
        """A memory on the backends named by `$RECALLSTACK_STORAGE`, `$RECALLSTACK_VECTOR`
        and `$RECALLSTACK_EMBEDDER` (each defaulting as in `Memory(...)`)."""
        return cls(*backends_from_env(), options, logger=logger)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_opened", None):
            warnings.warn(
                f"{type(self).__name__} was not closed: use `with Memory(...)` or close()",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )

    @property
    def processors(self) -> list[Processor]:
        """The processors to run, in order, on input and on output; they read this
        memory's configuration, and `recall` runs their code."""
        return [self.history, *([self.semantic] if self.semantic else [])]

    @property
    def _ops(self) -> Operations:
        return Operations(self.config, self.history, self.semantic, self.vector)

    @property
    def _backends(self) -> dict[str, object]:
        backends: dict[str, object] = {"Storage": self.storage}
        if self.vector is not None:
            backends["VectorStore"] = self.vector
        if self.semantic is not None:
            backends["CachedEmbedder"] = self.semantic.embedder
        return backends

    # ---- resources ----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        return run(self._ops.get_resource(resource_id), self._backends)

    def update_resource(self, resource_id: str, metadata: Mapping[str, Any]) -> Resource:
        """Create or update a resource (usually a user) and its metadata."""
        return run(self._ops.update_resource(resource_id, metadata), self._backends)

    # ---- threads ----------------------------------------------------------------

    def create_thread(
        self,
        resource_id: str,
        *,
        thread_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Thread:
        """Create (or replace) a thread. Its metadata is copied into its messages' vectors."""
        steps = self._ops.create_thread(resource_id, thread_id, title, metadata)
        return run(steps, self._backends)

    def get_thread(self, thread_id: str) -> Thread | None:
        return run(self._ops.get_thread(thread_id), self._backends)

    def list_threads(self, resource_id: str, **paging: Any) -> ThreadPage:
        return run(self._ops.list_threads(resource_id, paging), self._backends)

    def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ThreadUpdateResult:
        """Change a thread's title or metadata; new metadata is re-copied into its vectors.

        The messages' ledger records are cleared before anything changes, so a
        failure or a crash part-way leaves them for `reindex()`.
        """
        return run(self._ops.update_thread(thread_id, title, metadata), self._backends)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread, its messages, and their vectors in every index.

        Ledger first, vectors next, messages last: a crash part-way leaves
        messages that `reindex()` indexes again, never vectors of deleted ones.
        """
        run(self._ops.delete_thread(thread_id), self._backends)

    # ---- messages ----------------------------------------------------------------

    def save_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """Save messages (storage first: this succeeds or raises), then index them."""
        return run(self._ops.save_messages(messages, thread_config), self._backends)

    def update_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """Replace existing messages; changed text is embedded again."""
        return run(self._ops.update_messages(messages, thread_config), self._backends)

    def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages and their vectors in every index."""
        run(self._ops.delete_messages(ids), self._backends)

    # ---- recall ------------------------------------------------------------------

    def recall(
        self,
        thread_id: str,
        resource_id: str | None = None,
        vector_search_string: str | None = None,
        per_page: int | None = None,
        page: int = 0,
        thread_config: Mapping[str, Any] | None = None,
    ) -> RecallResult:
        """The newest messages of the thread, plus what `vector_search_string` recalls.

        Raises (unlike the processor, which fails open).
        """
        steps = self._ops.recall(
            thread_id, resource_id, vector_search_string, per_page, page, thread_config
        )
        return run(steps, self._backends)

    def search(
        self,
        resource_id: str,
        query: str,
        *,
        top_k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        threshold: float | None = None,
        thread_id: str | None = None,
    ) -> list[SearchHit]:
        """The resource's messages most similar to `query`, best first: from all its
        threads, or only `thread_id`'s (which must be the resource's). What is not given
        comes from this memory's semantic recall options; no thread is needed and no
        history is excluded."""
        steps = self._ops.search(resource_id, query, top_k, filter, threshold, thread_id)
        return run(steps, self._backends)

    def reindex(
        self, batch_size: int = 256, progress: Callable[[int, int], None] | None = None
    ) -> ReindexResult:
        """Index every message not yet indexed under the current index name, oldest first.

        A message the embedder refuses is reported (`failed_ids`) and the rest
        go on; a batch that fails as a whole is retried message by message, and
        when no message of it can be indexed (the vector store or the embedder
        is down), it stops there. `progress(done, total)` is called after each
        batch, `done` counting failures too.
        """
        return run(self._ops.reindex(batch_size, progress), self._backends)

    def doctor(
        self, *, repair: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> Checkup:
        """Check that every vector, ledger record and word entry agrees with its message
        (`core/doctor.py`): messages recorded as indexed without their vectors, vectors
        without a message, stale contextual vectors, word-index drift. With `repair`,
        fix them and return what a second check found (`Checkup.ok`)."""
        from recallstack.core import doctor

        found = doctor.examine(self, progress)
        return doctor.repair(self, found) if repair and not found.ok else found

    def close(self) -> None:
        """Close the stores this memory opened from URLs and the embedder it built from a
        name (not those passed in); idempotent."""
        opened, self._opened = self._opened, []
        for store in reversed(opened):
            store.close()
        built, self._built = self._built, None
        if built is not None:
            built.close()
