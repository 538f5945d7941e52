"""Memory: threads, messages, recall and reindexing over one storage, vector store and embedder."""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recallstack.core.config import MemoryConfig
from recallstack.core.embedder import Embedder
from recallstack.core.errors import InvalidInputError, NotFoundError
from recallstack.core.inputs import check_id, check_ids
from recallstack.core.message_history import MessageHistory
from recallstack.core.messages import Message, utc_now
from recallstack.core.metadata import normalize_metadata
from recallstack.core.processor import Processor
from recallstack.core.records import Resource, Thread, ThreadPage
from recallstack.core.registry import registry
from recallstack.core.semantic_recall import Hit, Recalled, SemanticRecall
from recallstack.core.storage import Storage
from recallstack.core.vector_store import VectorStore

DEFAULT_URL = "libsql:///local.db"
STORAGE_ENV, VECTOR_ENV, EMBEDDER_ENV = (
    "RECALLSTACK_STORAGE",
    "RECALLSTACK_VECTOR",
    "RECALLSTACK_EMBEDDER",
)
"""The variables `Memory.from_env()` and the CLI read."""


@dataclass(frozen=True)
class SaveResult:
    """Messages are always saved; `not_indexed` lists those whose vectors failed."""

    messages: list[Message]
    indexed: list[str] = field(default_factory=list)
    not_indexed: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class ThreadUpdateResult:
    """The updated thread; new metadata is re-copied into its messages' vectors, and
    `not_indexed` lists the messages whose vectors failed (left for `reindex`)."""

    thread: Thread
    indexed: list[str] = field(default_factory=list)
    not_indexed: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class RecallResult:
    """The history page and the recalled messages.

    `messages`: all of them, chronological. `context`: what the processors
    hand the model for the same turn (the same code builds it): messages of
    other threads in one system message, then this thread's, chronological.
    """

    messages: list[Message]
    context: list[Message]
    hits: list[Hit]
    total: int
    page: int
    per_page: int
    has_more: bool


@dataclass(frozen=True)
class SearchHit:
    """A message `Memory.search` found, and its score (higher is better, backends.md §3);
    under hybrid recall the fused score, with each signal's own beside it."""

    message: Message
    score: float
    dense_score: float | None = None
    keyword_score: float | None = None


@dataclass(frozen=True)
class ReindexResult:
    """How many messages were indexed and failed; the failures' ids and first error."""

    indexed: int
    failed: int
    error: str | None = None
    failed_ids: list[str] = field(default_factory=list)


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
        if isinstance(storage, Storage):
            self.storage = storage
        else:
            self.storage = registry().storage(storage or DEFAULT_URL)
            self._opened.append(self.storage)
        self.history = MessageHistory(storage=self.storage, config=self.config)
        self.semantic: SemanticRecall | None = None
        if embedder is None:
            if self.config.semantic_recall:
                raise InvalidInputError(
                    "semantic recall needs an embedder, e.g. 'local/all-MiniLM-L6-v2'"
                )
            return
        model = embedder if isinstance(embedder, Embedder) else registry().embedder(embedder)
        if isinstance(vector, VectorStore):
            store = vector
        else:
            store = registry().vector_store(vector or DEFAULT_URL)
            self._opened.append(store)
        self.semantic = SemanticRecall(
            storage=self.storage, vector=store, embedder=model, config=self.config, logger=logger
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
        return cls(
            os.environ.get(STORAGE_ENV) or None,
            os.environ.get(VECTOR_ENV) or None,
            os.environ.get(EMBEDDER_ENV) or None,
            options,
            logger=logger,
        )

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

    def _semantic(self) -> SemanticRecall:
        if self.semantic is None:
            raise InvalidInputError("this Memory has no embedder, so no semantic recall")
        return self.semantic

    # ---- resources ----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        return self.storage.get_resource(resource_id)

    def update_resource(self, resource_id: str, metadata: Mapping[str, Any]) -> Resource:
        """Create or update a resource (usually a user) and its metadata."""
        existing = self.storage.get_resource(resource_id)
        resource = (
            existing.model_copy(update={"metadata": dict(metadata), "updated_at": utc_now()})
            if existing is not None
            else Resource(id=resource_id, metadata=dict(metadata))
        )
        return self.storage.save_resource(resource)

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
        clean = normalize_metadata(metadata, "thread metadata")
        return self.storage.save_thread(
            Thread(
                id=thread_id or str(uuid.uuid4()),
                resource_id=resource_id,
                title=title,
                metadata=clean,
            )
        )

    def get_thread(self, thread_id: str) -> Thread | None:
        return self.storage.get_thread(thread_id)

    def list_threads(self, resource_id: str, **paging: Any) -> ThreadPage:
        return self.storage.list_threads(resource_id, **paging)

    def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ThreadUpdateResult:
        """Change a thread's title or metadata; new metadata is re-copied into its vectors.

        The messages' ledger records are cleared before anything changes, so a
        failure or a crash part-way leaves them for `reindex()`.
        """
        clean = None if metadata is None else normalize_metadata(metadata, "thread metadata")
        if clean is None or self.semantic is None:
            return ThreadUpdateResult(
                self.storage.update_thread(thread_id, title=title, metadata=clean)
            )
        self.storage.forget_indexed(thread_id=thread_id)
        thread = self.storage.update_thread(thread_id, title=title, metadata=clean)
        messages = self.storage.list_messages(thread_id).items
        report = self.semantic.index(
            messages, self.config.recall_or_default, threads={thread.id: thread}
        )
        return ThreadUpdateResult(thread, report.indexed, report.failed, report.error)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread, its messages, and their vectors in every index.

        Ledger first, vectors next, messages last: a crash part-way leaves
        messages that `reindex()` indexes again, never vectors of deleted ones.
        """
        names = self._index_names()  # read before the ledger records go
        self.storage.forget_indexed(thread_id=thread_id)
        if self.semantic is not None:
            self.semantic.delete_vectors(names, thread_id=thread_id)
        self.storage.delete_thread(thread_id)

    def _index_names(self) -> list[str]:
        return self.semantic.index_names() if self.semantic is not None else []

    # ---- messages ----------------------------------------------------------------

    def save_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """Save messages (storage first: this succeeds or raises), then index them."""
        recall = self.config.merged(thread_config).semantic_recall
        if not recall or self.semantic is None:
            return SaveResult(self.storage.save_messages(messages))
        saved = self.storage.upsert_messages(messages)
        if not saved.messages:
            return SaveResult([])
        # a message saved for the first time has no vectors to replace: its save
        # deletes nothing, which keeps every backend's write to an upsert
        new = [m.id for m in saved.messages if m.id not in saved.existing]
        report = self.semantic.index(saved.messages, recall, new=new, threads=saved.threads)
        return SaveResult(saved.messages, report.indexed, report.failed, report.error)

    def update_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """Replace existing messages; changed text is embedded again."""
        known = {m.id for m in self.storage.get_messages([m.id for m in messages])}
        missing = [m.id for m in messages if m.id not in known]
        if missing:
            raise NotFoundError(f"update_messages: no messages with ids {missing}")
        return self.save_messages(messages, thread_config)

    def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages and their vectors in every index."""
        if not ids:
            return
        names = self._index_names()  # in the order of delete_thread, for the same reason
        self.storage.forget_indexed(ids)
        if self.semantic is not None:
            self.semantic.delete_vectors(names, check_ids(ids, "ids"))
        self.storage.delete_messages(ids)

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
        config = self.config.merged(thread_config)
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        thread = self.storage.get_thread(thread_id)
        if thread is not None:
            if resource_id not in (None, thread.resource_id):
                raise InvalidInputError(
                    f"thread {thread_id!r} belongs to another resource than {resource_id!r}"
                )
            resource_id = thread.resource_id
        size = per_page if per_page is not None else (config.last_messages or 0)
        history = self.history.recent(thread_id, resource_id, size, page)
        recalled = Recalled([], [])
        context = history.items
        if vector_search_string and config.semantic_recall:
            semantic = self._semantic()
            recalled = semantic.recall(
                vector_search_string,
                thread_id,
                resource_id,
                config.semantic_recall,
                exclude={m.id for m in history.items},
            )
            context = semantic.merge(history.items, recalled.messages, thread_id)
        return RecallResult(
            messages=sorted([*history.items, *recalled.messages], key=lambda m: m.sort_key),
            context=context,
            hits=recalled.hits,
            total=history.total,
            page=page,
            per_page=size,
            has_more=history.has_more,
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
        check_id(resource_id, "resource_id")
        semantic = self._semantic()
        if thread_id is not None:
            thread = self.storage.get_thread(thread_id)
            if thread is None or thread.resource_id != resource_id:
                raise NotFoundError(f"resource {resource_id!r} has no thread {thread_id!r}")
        given = {"top_k": top_k, "filter": filter, "threshold": threshold}
        changes = {key: value for key, value in given.items() if value is not None}
        scope = "resource" if thread_id is None else "thread"
        config = self.config.merged({"semantic_recall": {**changes, "scope": scope}})
        hits = semantic.search(query, thread_id, resource_id, config.recall_or_default)
        found = {m.id: m for m in self.storage.get_messages([h.message_id for h in hits])}
        return [
            SearchHit(found[h.message_id], h.score, h.dense_score, h.keyword_score)
            for h in hits
            if h.message_id in found and found[h.message_id].resource_id == resource_id
        ]

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
        semantic = self._semantic()
        config = self.config.recall_or_default
        name = semantic.index_name(config)
        total = self.storage.count_unindexed(name) if progress is not None else 0
        done = 0
        failed: list[str] = []
        error: str | None = None
        cursor: Message | None = None
        while batch := self.storage.unindexed(name, limit=batch_size, after=cursor):
            cursor = batch[-1]
            report = semantic.index(batch, config)
            done += len(report.indexed)
            failed += report.refused
            error = error or report.error
            retry = set(report.failed) - set(report.refused)
            singles = [semantic.index([m], config) for m in batch if m.id in retry]
            done += sum(len(r.indexed) for r in singles)
            failed += [i for r in singles for i in r.failed]
            if progress is not None:
                progress(done + len(failed), total)
            if singles and all(r.failed and not r.refused for r in singles):
                break
        return ReindexResult(done, len(failed), error, failed)

    def close(self) -> None:
        """Close the stores this memory opened from URLs (not those passed in); idempotent."""
        opened, self._opened = self._opened, []
        for store in reversed(opened):
            store.close()
