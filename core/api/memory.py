"""Memory: threads, messages, recall and reindexing over one storage, vector store and embedder."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from recallstack.core.api.operations import (
    RecallResult,
    SaveResult,
    SearchHit,
    ThreadUpdateResult,
)
from recallstack.core.api.reindexing import ReindexResult
from recallstack.core.contracts.embedder import Embedder
from recallstack.core.contracts.processor import Processor
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.messages import Message
from recallstack.core.records import Resource, Thread, ThreadPage
from recallstack.core.runtime.config import MemoryConfig
from recallstack.core.runtime.engine import Engine, backends_from_env

if TYPE_CHECKING:
    from recallstack.core.api.doctor import Checkup, State


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
        self._engine = Engine(storage, vector, embedder, options, logger)
        self.config = self._engine.config
        self.storage = self._engine.storage
        self.vector = self._engine.vector
        """The vector store; without an embedder, the one given (or the default, beside
        the default storage), so that deletes and edits reach vectors others wrote."""
        self.history = self._engine.history
        self.semantic = self._engine.semantic

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
        engine = getattr(self, "_engine", None)
        if engine is not None and engine.opened:
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

    # ---- resources ----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        return self._engine.operations.get_resource(resource_id)

    def update_resource(self, resource_id: str, metadata: Mapping[str, Any]) -> Resource:
        """Create or update a resource (usually a user) and its metadata."""
        return self._engine.operations.update_resource(resource_id, metadata)

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
        return self._engine.operations.create_thread(resource_id, thread_id, title, metadata)

    def get_thread(self, thread_id: str) -> Thread | None:
        return self._engine.operations.get_thread(thread_id)

    def list_threads(self, resource_id: str, **paging: Any) -> ThreadPage:
        return self._engine.operations.list_threads(resource_id, paging)

    def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ThreadUpdateResult:
        """Change a thread's title or metadata; new metadata is re-copied into its vectors.

        The messages' ledger records are cleared before anything changes, so a
        failure or a crash part-way leaves them for `reindex()`.
        """
        return self._engine.operations.update_thread(thread_id, title, metadata)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread, its messages, and their vectors in every index.

        Ledger first, vectors next, messages last: a crash part-way leaves
        messages that `reindex()` indexes again, never vectors of deleted ones.
        """
        self._engine.operations.delete_thread(thread_id)

    # ---- messages ----------------------------------------------------------------

    def get_messages(self, ids: Sequence[str]) -> list[Message]:
        """The stored messages with these ids (those that exist), ordered by
        (created_at, id); each names its `resource_id`."""
        return self._engine.operations.get_messages(ids)

    def save_messages(
        self,
        messages: Sequence[Message],
        thread_config: Mapping[str, Any] | None = None,
        *,
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> SaveResult:
        """Save messages (storage first: this succeeds or raises), then index them.

        `vectors` are vectors of this memory's index by chunk id (a message's id, or
        `<id>#<k>` for the k-th chunk of one cut into several), written instead of
        embedding those chunks: how `migrate` and `import` copy a memory's vectors.
        Each is checked (dimension, finite, not zero) before anything is written.
        """
        return self._engine.operations.save_messages(messages, thread_config, vectors)

    def update_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """Replace existing messages; changed text is embedded again."""
        return self._engine.operations.update_messages(messages, thread_config)

    def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages and their vectors in every index."""
        self._engine.operations.delete_messages(ids)

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
        return self._engine.operations.recall(
            thread_id, resource_id, vector_search_string, per_page, page, thread_config
        )

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
        return self._engine.operations.search(
            resource_id, query, top_k, filter, threshold, thread_id
        )

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
        return self._engine.operations.reindex(batch_size, progress)

    def doctor(
        self, *, repair: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> Checkup:
        """Check that every vector, ledger record and word entry agrees with its message
        (`core/api/doctor.py`): messages recorded as indexed without their vectors, vectors
        without a message, stale contextual vectors, word-index drift. With `repair`,
        fix them and return what a second check found (`Checkup.ok`)."""
        from recallstack.core.api import doctor

        found = doctor.examine(self, progress)
        return doctor.repair(self, found) if repair and not found.ok else found

    def index_states(self, messages: Sequence[Message]) -> dict[str, dict[str, State]]:
        """Where these messages stand in each index, as `doctor` judges them: index name →
        message id → `indexed`, `not indexed`, `stale` or `not embedded` (`doctor.states`)."""
        from recallstack.core.api import doctor

        return doctor.states(self, messages)

    def close(self) -> None:
        """Close the stores this memory opened from URLs and the embedder it built from a
        name (not those passed in); idempotent."""
        self._engine.close()
