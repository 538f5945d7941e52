"""Retrieval: the nearest messages to a query, fused with keyword hits under hybrid recall,
then their neighbour windows, merged into the input (docs/spec/semantic-recall.md §5)."""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Collection

from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import IndexNotFoundError, InvalidInputError
from recallstack.core.filters import Node, matches
from recallstack.core.inputs import MAX_QUERY_LENGTH, check_id, check_text
from recallstack.core.messages import Message
from recallstack.core.recall.chunking import chunks
from recallstack.core.recall.fusion import fuse
from recallstack.core.recall.indexes import context_index, main_index
from recallstack.core.recall.other_threads import render
from recallstack.core.recall.records import Hit, Recalled, vector_metadata
from recallstack.core.records import Include
from recallstack.core.runtime.config import Fusion, SemanticRecallConfig
from recallstack.core.runtime.embedding_cache import CachedEmbedder
from recallstack.core.runtime.tracing import note, span
from recallstack.core.vectors import Matrix, Partition, QueryResult


class Retrieval:
    """Reads a memory's vectors and keyword index for a query."""

    def __init__(self, storage: Storage, vector: VectorStore, embedder: CachedEmbedder) -> None:
        self.storage = storage
        self.vector = vector
        self.embedder = embedder

    def search(
        self,
        query: str,
        thread_id: str | None,
        resource_id: str | None,
        config: SemanticRecallConfig,
    ) -> list[Hit]:
        """The top_k messages most similar to the query, within the scope (the resource's
        threads, or the one thread) and the filter."""
        if thread_id is not None or config.scope == "thread":
            check_id(thread_id, "thread_id")
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        if not isinstance(query, str) or len(query) > MAX_QUERY_LENGTH:
            raise InvalidInputError(
                f"the query must be a string of at most {MAX_QUERY_LENGTH:,} characters"
            )
        check_text(query, "query")
        if config.scope == "resource" and resource_id is None:
            raise InvalidInputError(
                "semantic recall with scope='resource' needs a resource_id (or use scope='thread')"
            )
        pieces = chunks(self.embedder, query, config.chunk_overlap)
        if not pieces:
            return []
        if resource_id is None:  # a thread's recall, its resource not named: the thread's
            assert thread_id is not None
            thread = self.storage.get_thread(thread_id)
            if thread is None:
                return []
            resource_id = thread.resource_id
        within = Partition(resource_id, thread_id if config.scope == "thread" else None)
        fusion = config.hybrid.fusion if config.hybrid else None
        pool = max(config.top_k, fusion.candidates) if fusion else config.top_k
        vectors = self.embedder.embed(pieces)
        model = self.embedder.embedder
        try:
            dense = self._nearest(
                main_index(config, model),
                vectors,
                pool,
                within,
                config.filter_node,
                config.threshold,
            )
        except IndexNotFoundError:
            return []  # nothing was ever saved under this embedder
        if fusion is None:
            return [
                Hit(i, str(r.metadata["thread_id"]), r.score, dense_score=r.score, dense_rank=n)
                for n, (i, r) in enumerate(list(dense.items())[: config.top_k], 1)
            ]
        context: dict[str, QueryResult] = {}
        if (context_name := context_index(config, model)) is not None:
            with contextlib.suppress(IndexNotFoundError):  # none written yet: see reindex()
                context = self._nearest(
                    context_name, vectors, pool, within, config.filter_node, None
                )
        return self._hybrid(dense, context, query, thread_id, resource_id, config, fusion)

    def _nearest(
        self,
        name: str,
        vectors: Matrix,
        pool: int,
        within: Partition,
        where: Node | None,
        threshold: float | None,
    ) -> dict[str, QueryResult]:
        """Each message's best vector in this index over the query's chunks, by message
        id, best first."""
        best: dict[str, QueryResult] = {}
        for vector in vectors:
            with span("vector.query", index=name, top_k=pool, threshold=threshold) as current:
                results = self.vector.query(
                    name,
                    vector,
                    pool,
                    filter=where,
                    min_score=threshold,
                    partition=within,
                )
                note(current, results=len(results))
            for r in results:
                message_id = str(r.metadata["message_id"])
                if message_id not in best or r.score > best[message_id].score:
                    best[message_id] = r
        return dict(sorted(best.items(), key=lambda hit: (-hit[1].score, hit[0])))

    def _hybrid(
        self,
        dense: dict[str, QueryResult],
        context: dict[str, QueryResult],
        query: str,
        thread_id: str | None,
        resource_id: str,
        config: SemanticRecallConfig,
        fusion: Fusion,
    ) -> list[Hit]:
        """The semantic hits, the contextual ones and the storage's keyword hits, fused
        (`fusion.fuse`). A keyword hit or a credited message that no vector found must
        pass the filter (checked on the metadata its vectors carry) and be in the
        scope, and with a `threshold` every hit must be a semantic one: the threshold
        stays a floor on semantic similarity. Returns the top_k."""
        in_thread = thread_id if config.scope == "thread" else None
        with span("keyword.query", top_k=fusion.candidates) as current:
            words = self.storage.search_words(
                query,
                resource_id=resource_id,
                thread_id=in_thread,
                limit=fusion.candidates,
            )
            note(current, results=len(words))
        if config.threshold is not None:  # only semantic hits are fused
            words = [(i, score) for i, score in words if i in dense]
            context = {i: r for i, r in context.items() if i in dense}
        threads = {i: str(r.metadata["thread_id"]) for i, r in [*context.items(), *dense.items()]}

        def in_scope(m: Message) -> bool:  # a credited message may have moved since
            return m.resource_id == resource_id and (in_thread is None or m.thread_id == in_thread)

        before = {
            i: str(r.metadata["previous_id"])
            for i, r in context.items()
            if "previous_id" in r.metadata
        }
        unseen = [
            i for i in dict.fromkeys([*(i for i, _ in words), *before.values()]) if i not in threads
        ]
        if config.filter_node is not None:  # ranks count the messages that pass it only
            found = self._passing(unseen, config.filter_node)
            threads |= {m.id: m.thread_id for m in found if in_scope(m)}
            candidates = set(threads)
        else:  # stored messages all: the threads of those that make the top are read later
            candidates = {*threads, *unseen}
        scores = fuse(fusion, candidates, list(dense), [i for i, _ in words], list(context), before)

        ranked = [(-score, i) for i, score in scores.items() if score > 0]
        if config.threshold is not None:
            ranked = [(score, i) for score, i in ranked if i in dense]
        top: list[str] = []
        while ranked and len(top) < config.top_k:  # best first, by id on ties
            head = [i for _, i in heapq.nsmallest(config.top_k - len(top), ranked)]
            if missing := [i for i in head if i not in threads]:
                found = self.storage.get_messages(missing)
                threads |= {m.id: m.thread_id for m in found if in_scope(m)}
            top += [i for i in head if i in threads]  # one deleted since drops out
            taken = set(head) if missing else None  # without one missing, the top is full
            ranked = [(score, i) for score, i in ranked if i not in taken] if taken else []
        keyword_scores = {i: score for i, score in words if i in candidates}
        dense_ranks = ranks(list(dense))
        keyword_ranks = ranks([i for i, _ in words if i in candidates])
        context_ranks = ranks(list(context))
        return [
            Hit(
                i,
                threads[i],
                scores[i],
                dense_score=dense[i].score if i in dense else None,
                keyword_score=keyword_scores.get(i),
                context_score=context[i].score if i in context else None,
                dense_rank=dense_ranks.get(i),
                keyword_rank=keyword_ranks.get(i),
                context_rank=context_ranks.get(i),
            )
            for i in top
        ]

    def _passing(self, ids: list[str], node: Node) -> list[Message]:
        """The stored messages among `ids` that pass the filter `node`."""
        found = self.storage.get_messages(ids) if ids else []
        threads = {}
        for t in {m.thread_id for m in found}:
            threads[t] = self.storage.get_thread(t)
        return [
            m
            for m in found
            if matches(node, {**vector_metadata(m, threads[m.thread_id]), "chunk": 0})
        ]

    def recall(
        self,
        query: str,
        thread_id: str,
        resource_id: str | None,
        config: SemanticRecallConfig,
        exclude: Collection[str] = frozenset(),
    ) -> Recalled:
        """Search, then fetch every hit's neighbours in one storage round trip. Raises."""
        hits = self.search(query, thread_id, resource_id, config)
        if not hits:
            return Recalled([], [])
        around = config.message_range
        with span(
            "neighbours", hits=len(hits), before=around.before, after=around.after
        ) as current:
            windows = self.storage.message_windows(
                [Include(id=h.message_id, before=around.before, after=around.after) for h in hits],
                resource_id=resource_id,
            )
            note(current, messages=len(windows))
        recalled = [
            m.model_copy(update={"source": "memory"}) for m in windows if m.id not in exclude
        ]
        return Recalled(hits, recalled)


def ranks(ids: list[str]) -> dict[str, int]:
    """Each id's place in a list ranked best first, counted from 1."""
    return {i: n for n, i in enumerate(ids, 1)}


def merge(
    storage: Storage, messages: list[Message], recalled: list[Message], thread_id: str
) -> list[Message]:
    """The input with recalled messages added: this thread's in chronological order,
    other threads' in one system message after the input's own."""
    if not recalled:
        return messages
    same = [m for m in recalled if m.thread_id == thread_id]
    other = [m for m in recalled if m.thread_id != thread_id]
    system = [m for m in messages if m.role == "system"]
    conversation = merge_chronologically([m for m in messages if m.role != "system"], same)
    if other:
        threads = {}
        for t in dict.fromkeys(m.thread_id for m in other):
            if (thread := storage.get_thread(t)) is not None:
                threads[t] = thread
        note = Message(
            id=f"semantic-recall:{thread_id}",
            thread_id=thread_id,
            role="system",
            content=render(other, threads),
            created_at=max(m.created_at for m in other),  # the same note for the same recall
            source="memory",
        )
        system = [*system, note]
    return [*system, *conversation]


def merge_chronologically(messages: list[Message], recalled: list[Message]) -> list[Message]:
    """Insert recalled messages into a conversation by (created_at, id), keeping its order."""
    out: list[Message] = []
    pending = sorted(recalled, key=lambda m: m.sort_key)
    for m in messages:
        while pending and pending[0].sort_key < m.sort_key:
            out.append(pending.pop(0))
        out.append(m)
    return [*out, *pending]
