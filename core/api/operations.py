"""What a memory does, written once as blocking code: `Memory` calls it, and `AsyncMemory` runs
the same code on the event loop or in a worker thread (`core/runtime/awaiting.py`), so both
behave the same by construction."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recallstack.core.api import traces
from recallstack.core.api.message_history import MessageHistory
from recallstack.core.api.reindexing import ReindexResult, reindex
from recallstack.core.contracts.vector_store import VectorStore, check_vector
from recallstack.core.errors import InvalidInputError, NotFoundError
from recallstack.core.inputs import check_id, check_ids
from recallstack.core.messages import Message, utc_now
from recallstack.core.metadata import normalize_metadata
from recallstack.core.recall import Hit, Recalled, SemanticRecall
from recallstack.core.recall.derived import (
    context_size,
    delete_vectors,
    followers,
    recorded_indexes,
)
from recallstack.core.recall.retrieval import merge
from recallstack.core.records import Resource, Thread, ThreadPage
from recallstack.core.runtime.config import MemoryConfig, SemanticRecallConfig
from recallstack.core.runtime.tracing import note, span, traced
from recallstack.core.vectors import Matrix


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
    recalled_ids: list[str] = field(default_factory=list)
    """Which of `messages` recall added (the hits and their neighbours); the others are
    the history page. In Python each also says so itself (`Message.source`)."""


@dataclass(frozen=True)
class SearchHit:
    """A message `Memory.search` found, and its score (higher is better, backends.md §3);
    under hybrid recall the fused score, with each signal's own score and rank beside it."""

    message: Message
    score: float
    dense_score: float | None = None
    keyword_score: float | None = None
    context_score: float | None = None
    dense_rank: int | None = None
    keyword_rank: int | None = None
    context_rank: int | None = None

    @property
    def message_id(self) -> str:
        return self.message.id

    @property
    def thread_id(self) -> str:
        return self.message.thread_id


class Operations:
    """Every `Memory` method; the docstrings are on `Memory`.

    `vector` is the memory's vector store, which it has with an embedder and may have
    without one: deletes and edits then still reach the vectors others wrote."""

    def __init__(
        self,
        config: MemoryConfig,
        history: MessageHistory,
        semantic: SemanticRecall | None,
        vector: VectorStore | None = None,
    ) -> None:
        self.config = config
        self.history = history
        self.semantic = semantic
        self.storage = history.storage
        self.vector = semantic.vector if semantic is not None else vector

    def _semantic(self) -> SemanticRecall:
        if self.semantic is None:
            raise InvalidInputError("this Memory has no embedder, so no semantic recall")
        return self.semantic

    # ---- resources ----------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        return self.storage.get_resource(resource_id)

    def update_resource(self, resource_id: str, metadata: Mapping[str, Any]) -> Resource:
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
        thread_id: str | None,
        title: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> Thread:
        clean = normalize_metadata(metadata, "thread metadata")
        thread = Thread(
            id=thread_id or str(uuid.uuid4()), resource_id=resource_id, title=title, metadata=clean
        )
        return self.storage.save_thread(thread)

    def get_thread(self, thread_id: str) -> Thread | None:
        return self.storage.get_thread(thread_id)

    def list_threads(self, resource_id: str, paging: Mapping[str, Any]) -> ThreadPage:
        return self.storage.list_threads(resource_id, **paging)

    def update_thread(
        self, thread_id: str, title: str | None, metadata: Mapping[str, Any] | None
    ) -> ThreadUpdateResult:
        clean = None if metadata is None else normalize_metadata(metadata, "thread metadata")
        if clean is None or self.vector is None:
            updated = self.storage.update_thread(thread_id, title=title, metadata=clean)
            return ThreadUpdateResult(updated)
        # every vector carries its thread's metadata: those of indexes this memory does
        # not write go (their ledger records first), for a `reindex()` that writes them
        names = self._index_names()
        others = [n for n in names if n not in self._own_names(self.config.recall_or_default)]
        self.storage.forget_indexed(thread_id=thread_id)
        thread = self.storage.update_thread(thread_id, title=title, metadata=clean)
        delete_vectors(self.storage, self.vector, others, thread_id=thread_id)
        if self.semantic is None:
            return ThreadUpdateResult(thread)
        messages = self.storage.list_messages(thread_id).items
        report = self.semantic.indexing.index(
            messages, self.config.recall_or_default, threads={thread.id: thread}
        )
        return ThreadUpdateResult(thread, report.indexed, report.failed, report.error)

    def delete_thread(self, thread_id: str) -> None:
        names = self._index_names()  # read before the ledger records go
        self.storage.forget_indexed(thread_id=thread_id)
        if self.vector is not None:
            delete_vectors(self.storage, self.vector, names, thread_id=thread_id)
        self.storage.delete_thread(thread_id)

    def _index_names(self) -> list[str]:
        """Every index that may hold this storage's vectors (`derived.recorded_indexes`),
        this memory's own among them."""
        if self.semantic is not None:
            return self.semantic.index_names()
        if self.vector is None:
            return []
        return recorded_indexes(self.storage, self.vector)

    def _own_names(self, recall: SemanticRecallConfig | None) -> set[str]:
        """The indexes this memory re-embeds itself under `recall`."""
        if self.semantic is None or not recall:
            return set()
        return self.semantic.own_index_names(recall)

    def _others_followers(
        self, names: list[str], own: set[str], ids: Sequence[str]
    ) -> dict[str, list[str]]:
        """For each contextual index this memory does not write: the messages whose
        vectors there hold one of `ids` (read before and after a change, since a
        message's followers change when it moves)."""
        found: dict[str, list[str]] = {}
        for name in names:
            size = context_size(name)
            if size and name not in own and ids:
                found[name] = [m.id for m in followers(self.storage, ids, size)]
        return found

    def _drop_others(
        self, stale: dict[str, list[str]], changed: Sequence[str], names: list[str], own: set[str]
    ) -> None:
        """What this memory cannot re-embed goes, its ledger records first, so that a
        `reindex()` by a memory that writes those indexes makes it again: the changed
        messages' vectors in the indexes it does not write, and their followers'
        contextual vectors there."""
        others = [n for n in names if n not in own]
        followers_ = [i for ids in stale.values() for i in ids]
        if not others or not (followers_ or changed) or self.vector is None:
            return
        if followers_:  # the changed messages' records went with their save
            self.storage.forget_indexed(followers_)
        delete_vectors(self.storage, self.vector, others, changed)
        for name, ids in stale.items():
            delete_vectors(self.storage, self.vector, [name], ids)

    # ---- messages ----------------------------------------------------------------

    def get_messages(self, ids: Sequence[str]) -> list[Message]:
        return self.storage.get_messages(ids)

    @traced("save", traces.saved)
    def save_messages(
        self,
        messages: Sequence[Message],
        thread_config: Mapping[str, Any] | None,
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> SaveResult:
        recall = self.config.merged(thread_config).semantic_recall or None
        known = self._checked_vectors(vectors) if vectors else {}
        own = self._own_names(recall)
        # the ledger's names are cheap to read; only indexes others write cost more
        names = self.storage.index_names() if self.vector is not None else []
        ids = [m.id for m in messages if isinstance(m, Message)]
        before = self._others_followers(names, own, ids)
        stale = self._moving_followers(messages, recall)
        with span("storage.write", messages=len(messages)):
            saved = self.storage.upsert_messages(messages)
        if not saved.messages:
            return SaveResult([])
        after = self._others_followers(names, own, ids)
        others = {n: [*before.get(n, []), *after.get(n, [])] for n in {*before, *after}}
        self._drop_others(others, sorted(saved.existing), names, own)
        if not recall or self.semantic is None:
            return SaveResult(saved.messages)
        # a message saved for the first time has no vectors to replace: its save
        # deletes nothing, which keeps every backend's write to an upsert
        new = [m.id for m in saved.messages if m.id not in saved.existing]
        saved_ids = {m.id for m in saved.messages}
        following = followers(self.storage, list(saved_ids), recall.context)
        refresh = {m.id: m for m in [*stale, *following] if m.id not in saved_ids}
        report = self.semantic.indexing.index(
            [*saved.messages, *refresh.values()],
            recall,
            new=new,
            threads=saved.threads,
            known=known,
        )
        return SaveResult(
            saved.messages,
            [i for i in report.indexed if i in saved_ids],
            [i for i in report.failed if i in saved_ids],
            report.error,
        )

    def _checked_vectors(self, given: Mapping[str, Sequence[float]]) -> dict[str, Matrix]:
        """Vectors given to a save, each checked as an upsert checks it, before anything
        is written: an error names the chunk id."""
        semantic = self._semantic()
        if not isinstance(given, Mapping):
            raise InvalidInputError("vectors must map chunk ids to vectors")
        dimension = semantic.embedder.embedder.dimension
        metric = semantic.config.recall_or_default.index_config.metric
        return {
            str(chunk): check_vector(vector, dimension, metric, f"vectors[{chunk!r}]")
            for chunk, vector in given.items()
        }

    def _moving_followers(
        self, messages: Sequence[Message], recall: SemanticRecallConfig | None
    ) -> list[Message]:
        """Before a save, with contextual vectors: the messages after the stored versions
        of these, whose context changes if a message moves or changes. Their ledger
        records go first, so that a crash before they are re-embedded leaves them for
        `reindex()`. Read per resource, so that nothing of another resource is touched."""
        if not recall or not recall.context or self.semantic is None:
            return []
        if any(not isinstance(m, Message) for m in messages):
            return []  # the save refuses them
        by_resource: dict[str, list[str]] = {}
        for thread_id in dict.fromkeys(m.thread_id for m in messages):
            thread = self.storage.get_thread(thread_id)
            if thread is not None:
                named = [m.id for m in messages if m.thread_id == thread_id]
                by_resource.setdefault(thread.resource_id, []).extend(named)
        stale: list[Message] = []
        for resource_id, ids in by_resource.items():
            stale += followers(self.storage, ids, recall.context, resource_id)
        if stale:
            self.storage.forget_indexed([m.id for m in stale])
        return stale

    def update_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None
    ) -> SaveResult:
        known = {m.id for m in self.storage.get_messages([m.id for m in messages])}
        missing = [m.id for m in messages if m.id not in known]
        if missing:
            raise NotFoundError(f"update_messages: no messages with ids {missing}")
        return self.save_messages(messages, thread_config)

    def delete_messages(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        ids = check_ids(ids, "ids")
        names = self._index_names()  # in the order of delete_thread, for its reason
        config = self.config.recall_or_default
        own = self._own_names(config)
        # the contextual vectors of the messages after these hold their text: this
        # memory makes its own again; those of indexes it does not write go
        others = self._others_followers(names, own, ids)
        followers_ = []
        if self.semantic is not None:
            followers_ = followers(self.storage, ids, config.context)
        stale = [i for found in others.values() for i in found]
        self.storage.forget_indexed([*ids, *(m.id for m in followers_), *stale])
        if self.vector is not None:
            delete_vectors(self.storage, self.vector, names, ids)
            for name, found in others.items():
                delete_vectors(self.storage, self.vector, [name], found)
        self.storage.delete_messages(ids)
        if self.semantic is not None and followers_:
            self.semantic.indexing.index(followers_, config)

    # ---- recall ------------------------------------------------------------------

    @traced("recall", traces.recalled)
    def recall(
        self,
        thread_id: str,
        resource_id: str | None,
        vector_search_string: str | None,
        per_page: int | None,
        page: int,
        thread_config: Mapping[str, Any] | None,
    ) -> RecallResult:
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
        with span("history", per_page=size, page=page) as reading:
            history = self.history.recent(thread_id, resource_id, size, page)
            note(reading, messages=len(history.items), total=history.total)
        recalled = Recalled([], [])
        context = history.items
        if vector_search_string and config.semantic_recall:
            semantic = self._semantic()
            recalled = semantic.retrieval.recall(
                vector_search_string,
                thread_id,
                resource_id,
                config.semantic_recall,
                exclude={m.id for m in history.items},
            )
            context = merge(self.storage, history.items, recalled.messages, thread_id)
        return RecallResult(
            messages=sorted([*history.items, *recalled.messages], key=lambda m: m.sort_key),
            context=context,
            hits=recalled.hits,
            total=history.total,
            page=page,
            per_page=size,
            has_more=history.has_more,
            recalled_ids=[m.id for m in recalled.messages],
        )

    @traced("search", traces.searched)
    def search(
        self,
        resource_id: str,
        query: str,
        top_k: int | None,
        filter: Mapping[str, Any] | None,
        threshold: float | None,
        thread_id: str | None,
    ) -> list[SearchHit]:
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
        hits = semantic.retrieval.search(query, thread_id, resource_id, config.recall_or_default)
        messages = self.storage.get_messages([h.message_id for h in hits])
        found = {m.id: m for m in messages}
        return [
            SearchHit(
                found[h.message_id],
                h.score,
                h.dense_score,
                h.keyword_score,
                h.context_score,
                h.dense_rank,
                h.keyword_rank,
                h.context_rank,
            )
            for h in hits
            if h.message_id in found and found[h.message_id].resource_id == resource_id
        ]

    def reindex(
        self, batch_size: int, progress: Callable[[int, int], None] | None
    ) -> ReindexResult:
        return reindex(self._semantic(), self.config.recall_or_default, batch_size, progress)
