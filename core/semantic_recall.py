"""SemanticRecall: embed saved messages; recall similar ones with their neighbours.

Usable on its own in any agent loop (`process_input` before the model call,
`process_output_result` after it) or through `Memory`, which builds it and
runs the same code for `Memory.recall`. Behaviour: docs/spec/semantic-recall.md.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.calls import Steps, call, run
from recallstack.core.chunking import chunk_text
from recallstack.core.config import Fusion, MemoryConfig, SemanticRecallConfig
from recallstack.core.cross_thread import render
from recallstack.core.derived import context_text, contexts, digest, followers
from recallstack.core.embedder import Embedder, index_name
from recallstack.core.embedding_cache import CachedEmbedder
from recallstack.core.errors import EmbeddingRefusedError, IndexNotFoundError, InvalidInputError
from recallstack.core.filters import Condition, Node, and_filters, matches
from recallstack.core.inputs import MAX_QUERY_LENGTH, check_id, check_text
from recallstack.core.messages import Message
from recallstack.core.metadata import epoch_ms, normalize_metadata
from recallstack.core.processor import RequestContext
from recallstack.core.records import Include, Thread
from recallstack.core.scores import Matrix
from recallstack.core.storage import Storage
from recallstack.core.vector_store import VectorStore
from recallstack.core.vectors import QueryResult

CONTEXT_CHECKS = 3
"""How many times a save reads contexts again after writing them (`_write_contexts`)."""
RESERVED_KEYS = ("message_id", "thread_id", "resource_id", "role", "created_at", "chunk")


@dataclass(frozen=True)
class Hit:
    """A recalled message and its score: the best over the query's chunks, or under
    hybrid recall the fused one, with each signal's own score beside it."""

    message_id: str
    thread_id: str
    score: float
    dense_score: float | None = None
    """The semantic similarity (None: not among the semantic candidates)."""
    keyword_score: float | None = None
    """BM25 (None: not among the keyword candidates, or no hybrid recall)."""
    context_score: float | None = None
    """The similarity of the message's contextual vector (None: not among those
    candidates, or no contextual vectors)."""


@dataclass(frozen=True)
class IndexReport:
    """What indexing a batch did: failures are reported, never dropped."""

    indexed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    error: str | None = None
    refused: list[str] = field(default_factory=list)
    """The failed messages the embedder refused: trying them again will not help."""


@dataclass(frozen=True)
class Recalled:
    hits: list[Hit]
    messages: list[Message]
    """The hits and their neighbours, chronological, tagged `source="memory"`."""


class SemanticRecall:
    """Input and output processor `semantic-recall`.

    `options` are `SemanticRecallConfig` fields (`top_k=4, message_range=1,
    scope="resource", ...`). `Memory` passes its whole `MemoryConfig` as
    `config` instead, so that both read one configuration object.
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
        self.config = config or MemoryConfig(
            semantic_recall=SemanticRecallConfig.model_validate(options)
        )
        self.log = logger or logging.getLogger("recallstack.semantic_recall")
        self._ready: set[str] = set()

    @property
    def _backends(self) -> dict[str, object]:
        return {
            "Storage": self.storage,
            "VectorStore": self.vector,
            "CachedEmbedder": self.embedder,
        }

    # ---- configuration -------------------------------------------------------------

    def index_name(self, config: SemanticRecallConfig | None = None) -> str:
        """The one index name every read and write path uses."""
        explicit = (config or self.config.recall_or_default).index_name
        model = self.embedder.embedder
        return explicit or index_name(model.model_id, model.dimension)

    def context_index_name(self, config: SemanticRecallConfig | None = None) -> str | None:
        """The index of contextual vectors (`HybridConfig.context`), named for the main
        index and the context's size so that vectors of two kinds never share one."""
        context = (config or self.config.recall_or_default).context
        return f"{self.index_name(config)}_context{context}" if context else None

    def index_names(self) -> list[str]:
        """Indexes that may hold this memory's vectors: those recorded in storage and
        the current one, where they exist."""
        return run(self.index_names_steps(), self._backends)

    def index_names_steps(self) -> Steps[list[str]]:
        current = [self.index_name(), self.context_index_name()]
        recorded = {*(yield from call(Storage.index_names)), *filter(None, current)}
        return sorted(recorded & set((yield from call(VectorStore.list_indexes))))

    def own_index_names(self, config: SemanticRecallConfig | None = None) -> set[str]:
        """The indexes this memory writes with `config`: it can re-embed their vectors."""
        return {self.index_name(config), *filter(None, [self.context_index_name(config)])}

    def _ensure_index(self, name: str, config: SemanticRecallConfig) -> Steps[None]:
        if name not in self._ready:
            dimension = self.embedder.embedder.dimension
            yield from call(VectorStore.create_index, name, dimension, config=config.index_config)
            self._ready.add(name)

    # ---- writing ---------------------------------------------------------------------

    def index(
        self,
        messages: Sequence[Message],
        config: SemanticRecallConfig | None = None,
        new: Collection[str] = (),
        threads: Mapping[str, Thread] | None = None,
        known: Mapping[str, Sequence[float]] | None = None,
    ) -> IndexReport:
        """Write messages' vectors (one per chunk), then record them as indexed.

        The caller has cleared the messages' ledger records first (saving a
        message does; see `Memory`), so a crash at any point leaves them for
        `Memory.reindex()`. System messages and messages without text have no
        vectors: any they had are removed. `new` names messages the caller
        knows had no stored version before, so no vectors to remove; `threads`
        the messages' threads when the caller has read them already; `known`
        vectors of this index's model by chunk id, written instead of embedding
        those chunks (a migration copies them). An embedder or vector store
        failure is logged and reported, and nothing is recorded; a message the
        embedder refuses (and only it) is reported and left unrecorded, while
        the rest of the batch is indexed.
        """
        return run(self.index_steps(messages, config, new, threads, known), self._backends)

    def index_steps(
        self,
        messages: Sequence[Message],
        config: SemanticRecallConfig | None = None,
        new: Collection[str] = (),
        threads: Mapping[str, Thread] | None = None,
        known: Mapping[str, Sequence[float]] | None = None,
    ) -> Steps[IndexReport]:
        config = config or self.config.recall_or_default
        name = self.index_name(config)
        context_name = self.context_index_name(config)
        messages = list(messages)
        threads = dict(threads or {})
        unsettled: dict[str, str] = {}
        try:
            own = {m.id: self.chunks_of(m, config) for m in messages}
            refused = yield from self._write(
                name, messages, config, own, {}, new, threads, known or {}
            )
            if context_name is not None:
                also, unsettled = yield from self._write_contexts(
                    context_name, messages, own, config, new, threads
                )
                refused |= also
        except Exception as exc:
            self._ready -= {name, context_name}
            self.log.exception("semantic recall: indexing %d messages failed", len(messages))
            return IndexReport(failed=[m.id for m in messages], error=str(exc))
        failed = {**refused, **unsettled}
        done = [m.id for m in messages if m.id not in failed]
        for indexed in filter(None, (name, context_name)):
            yield from call(Storage.mark_indexed, done, indexed)
        if not failed:
            return IndexReport(indexed=done)
        first = next(iter(failed))
        self.log.error(
            "semantic recall: %d messages not indexed, %s: %s", len(failed), first, failed[first]
        )
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        error = f"message {first!r}: {failed[first]}{more}"
        return IndexReport(done, list(failed), error, refused=list(refused))

    def _write_contexts(
        self,
        name: str,
        messages: list[Message],
        own: Mapping[str, list[str]],
        config: SemanticRecallConfig,
        new: Collection[str],
        threads: dict[str, Thread],
    ) -> Steps[tuple[dict[str, str], dict[str, str]]]:
        """Write the messages' contextual vectors, then read their contexts again: a
        save running beside this one may have changed one after it was read (its own
        rewrite then lost to this older one). Those are written again, so the last
        writer of a vector always checks after it. Returns the refused messages, and
        those whose context still changed after `CONTEXT_CHECKS` rounds (left for
        `reindex()`)."""
        chunks, previous = yield from self._contexts(messages, own, config)
        refused = yield from self._write(name, messages, config, chunks, previous, new, threads, {})
        todo = [m for m in messages if m.id not in refused]
        for _ in range(CONTEXT_CHECKS):
            again, after = yield from self._contexts(todo, own, config)
            todo = [m for m in todo if (again[m.id], after[m.id]) != (chunks[m.id], previous[m.id])]
            if not todo:
                return refused, {}
            chunks, previous = {**chunks, **again}, {**previous, **after}
            refused |= yield from self._write(name, todo, config, chunks, previous, (), threads, {})
            todo = [m for m in todo if m.id not in refused]
        why = "its context changed while it was written; reindex() writes it"
        return refused, dict.fromkeys((m.id for m in todo), why)

    def _contexts(
        self, messages: list[Message], own: Mapping[str, list[str]], config: SemanticRecallConfig
    ) -> Steps[tuple[dict[str, list[str]], dict[str, dict[str, Any]]]]:
        """Each message's contextual text, chunked (`derived.contexts`); and, as vector
        metadata, the message just before it (`previous_id`), which a contextual hit
        credits, and the text's digest, by which `doctor` tells a stale vector. A
        message with no chunks of its own (`own`) has none."""
        embedded = [m for m in messages if own[m.id]]
        earlier = yield from contexts(embedded, config.context)
        chunks: dict[str, list[str]] = {}
        previous: dict[str, dict[str, Any]] = {}
        for m in messages:
            if not own[m.id]:
                chunks[m.id], previous[m.id] = [], {}
                continue
            text = context_text(earlier[m.id], m)
            chunks[m.id] = self._chunks(text, config.chunk_overlap)
            previous[m.id] = {"context_digest": digest(text)}
            if earlier[m.id]:
                previous[m.id]["previous_id"] = earlier[m.id][-1].id
        return chunks, previous

    def _write(
        self,
        name: str,
        messages: list[Message],
        config: SemanticRecallConfig,
        chunks: Mapping[str, list[str]],
        extra: Mapping[str, dict[str, Any]],
        new: Collection[str],
        threads: dict[str, Thread],
        known: Mapping[str, Sequence[float]],
    ) -> Steps[dict[str, str]]:
        """Upsert every chunk's vector, then delete the chunks a message no longer has:
        new vectors exist before old ones go, and a save of new messages deletes nothing.

        `chunks` are the texts embedded of each message, `extra` metadata its vectors
        carry besides `vector_metadata`. Returns the messages the embedder refused a
        chunk of, with why: none of their vectors is touched.
        """
        ids: list[str] = []
        texts: list[str] = []
        metadata: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        for m in messages:
            counts[m.id] = len(chunks[m.id])
            if not chunks[m.id]:
                continue
            if m.thread_id not in threads:
                found = yield from call(Storage.get_thread, m.thread_id)
                if found is not None:
                    threads[m.thread_id] = found
            common = {**vector_metadata(m, threads.get(m.thread_id)), **extra.get(m.id, {})}
            for k, chunk in enumerate(chunks[m.id]):
                ids.append(chunk_id(m.id, k, len(chunks[m.id])))
                texts.append(chunk)
                metadata.append({**common, "chunk": k})
        if (
            not ids
            and name not in self._ready
            and name not in (yield from call(VectorStore.list_indexes))
        ):
            return {}  # nothing to write, and no index that could hold stale chunks
        yield from self._ensure_index(name, config)
        refused: dict[str, str] = {}
        if ids:
            vectors = np.empty((len(ids), self.embedder.embedder.dimension), dtype=np.float32)
            todo = [i for i, chunk in enumerate(ids) if chunk not in known]
            for i, chunk in enumerate(ids):
                if chunk in known:
                    vectors[i] = known[chunk]
            if todo:
                try:
                    vectors[todo] = yield from call(CachedEmbedder.embed, [texts[i] for i in todo])
                except EmbeddingRefusedError as exc:
                    vectors[todo] = exc.vectors
                    refused = {
                        str(metadata[todo[i]]["message_id"]): why for i, why in exc.refused.items()
                    }
            keep = [i for i, row in enumerate(metadata) if row["message_id"] not in refused]
            if keep:
                yield from call(
                    VectorStore.upsert,
                    name,
                    [ids[i] for i in keep],
                    vectors[keep],
                    [metadata[i] for i in keep],
                )
        new = set(new)
        yield from self._delete_stale(
            name, {m: n for m, n in counts.items() if m not in new and m not in refused}
        )
        yield from call(VectorStore.wait_until_consistent, name)  # the next recall reads it
        return refused

    def followers_steps(
        self,
        ids: Sequence[str],
        config: SemanticRecallConfig,
        resource_id: str | None = None,
    ) -> Steps[list[Message]]:
        """The messages whose contextual vectors of `config` hold one of these."""
        return (yield from followers(ids, config.context, resource_id))

    def chunks_of(self, message: Message, config: SemanticRecallConfig | None = None) -> list[str]:
        """What is embedded of a message: its text's chunks; none of a system message."""
        if message.role == "system":
            return []
        return self._chunks(message.text, (config or self.config.recall_or_default).chunk_overlap)

    def _chunks(self, text: str, overlap: int) -> list[str]:
        model = self.embedder.embedder
        return chunk_text(text, model.max_input, model.token_offsets, overlap)

    def _delete_stale(self, name: str, counts: dict[str, int]) -> Steps[None]:
        """Delete the chunks beyond each message's current count of `counts[id]`.

        Chunk ids are deterministic (`chunk_id`), so what may be stale is known
        without reading: chunks numbered from the count on, and the one id whose
        name changes between one chunk and several (`<id>` against `<id>#0`).
        """
        if not counts:
            return
        renamed = [chunk_id(i, 0, 2 if n == 1 else 1) for i, n in counts.items() if n > 0]
        if renamed:
            yield from call(VectorStore.delete, name, ids=renamed)
        beyond: dict[int, list[str]] = {}
        for message_id, n in counts.items():
            beyond.setdefault(n, []).append(message_id)
        size = self.vector.capabilities.max_filter_values
        for n, group in beyond.items():
            for ids in batched(group, size):
                stale = and_filters(
                    Condition(("message_id",), "$in", tuple(ids)), Condition(("chunk",), "$gte", n)
                )
                yield from call(VectorStore.delete, name, filter=stale)

    # ---- reading ---------------------------------------------------------------------

    def search(
        self,
        query: str,
        thread_id: str | None,
        resource_id: str | None,
        config: SemanticRecallConfig | None = None,
    ) -> list[Hit]:
        """The top_k messages most similar to the query, within the scope (the resource's
        threads, or the one thread) and the filter."""
        return run(self.search_steps(query, thread_id, resource_id, config), self._backends)

    def search_steps(
        self,
        query: str,
        thread_id: str | None,
        resource_id: str | None,
        config: SemanticRecallConfig | None = None,
    ) -> Steps[list[Hit]]:
        config = config or self.config.recall_or_default
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
        scope = (
            Condition(("resource_id",), "$eq", resource_id)
            if config.scope == "resource"
            else Condition(("thread_id",), "$eq", thread_id)
        )
        combined = and_filters(scope, config.filter_node)
        chunks = self._chunks(query, config.chunk_overlap)
        if not chunks:
            return []
        fusion = config.hybrid.fusion if config.hybrid else None
        pool = max(config.top_k, fusion.candidates) if fusion else config.top_k
        vectors = yield from call(CachedEmbedder.embed, chunks)
        try:
            dense = yield from self._nearest(
                self.index_name(config), vectors, pool, combined, config.threshold
            )
        except IndexNotFoundError:
            return []  # nothing was ever saved under this embedder
        if fusion is None:
            return [
                Hit(i, str(r.metadata["thread_id"]), r.score, dense_score=r.score)
                for i, r in list(dense.items())[: config.top_k]
            ]
        context: dict[str, QueryResult] = {}
        if (context_name := self.context_index_name(config)) is not None:
            with contextlib.suppress(IndexNotFoundError):  # none written yet: see reindex()
                context = yield from self._nearest(context_name, vectors, pool, combined, None)
        fused = yield from self._fuse(dense, context, query, thread_id, resource_id, config, fusion)
        return fused[: config.top_k]

    def _nearest(
        self,
        name: str,
        vectors: Matrix,
        pool: int,
        where: Node | None,
        threshold: float | None,
    ) -> Steps[dict[str, QueryResult]]:
        """Each message's best vector in this index over the query's chunks, by message
        id, best first."""
        best: dict[str, QueryResult] = {}
        for vector in vectors:
            results = yield from call(
                VectorStore.query, name, vector, pool, filter=where, min_score=threshold
            )
            for r in results:
                message_id = str(r.metadata["message_id"])
                if message_id not in best or r.score > best[message_id].score:
                    best[message_id] = r
        return dict(sorted(best.items(), key=lambda hit: (-hit[1].score, hit[0])))

    def _fuse(
        self,
        dense: dict[str, QueryResult],
        context: dict[str, QueryResult],
        query: str,
        thread_id: str | None,
        resource_id: str | None,
        config: SemanticRecallConfig,
        fusion: Fusion,
    ) -> Steps[list[Hit]]:
        """Reciprocal rank fusion of the semantic hits, the contextual ones and the
        storage's keyword hits: each signal adds its weight / (rrf_k + rank), and a
        contextual hit credits part of its weight to the message before it.

        A keyword hit or a credited message that no vector found must pass the
        filter (checked on the metadata its vectors carry) and be in the scope,
        and with a `threshold` every hit must be a semantic one:
        the threshold stays a floor on semantic similarity. Returns the top_k."""
        if resource_id is None:
            thread = yield from call(Storage.get_thread, str(thread_id))
            resource_id = thread.resource_id if thread else None
        words: list[tuple[str, float]] = []
        in_thread = thread_id if config.scope == "thread" else None
        if resource_id is not None:
            words = yield from call(
                Storage.search_words,
                query,
                resource_id=resource_id,
                thread_id=in_thread,
                limit=fusion.candidates,
            )
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
        credited = list(before.values())
        unseen = [i for i in dict.fromkeys([*(i for i, _ in words), *credited]) if i not in threads]
        if config.filter_node is not None:  # ranks count the messages that pass it only
            found = yield from self._passing(unseen, config.filter_node)
            threads |= {m.id: m.thread_id for m in found if in_scope(m)}
            candidates = set(threads)
        else:  # stored messages all: the threads of those that make the top are read later
            candidates = {*threads, *unseen}

        share = fusion.context_share if context else 0.0
        semantic = fusion.weight * (1 - share)
        contextual = fusion.weight * share * (1 - fusion.context_credit)
        credit = fusion.weight * share * fusion.context_credit
        keyword = [(i, score) for i, score in words if i in candidates]
        scores: dict[str, float] = dict.fromkeys(candidates, 0.0)
        for rank, i in enumerate(dense, start=1):
            scores[i] += semantic / (fusion.rrf_k + rank)
        for rank, i in enumerate(context, start=1):
            scores[i] += contextual / (fusion.rrf_k + rank)
            if (previous := before.get(i)) in candidates:
                scores[previous] += credit / (fusion.rrf_k + rank)
        for rank, (i, _) in enumerate(keyword, start=1):
            scores[i] += (1 - fusion.weight) / (fusion.rrf_k + rank)

        ranked = [(-score, i) for i, score in scores.items() if score > 0]
        if config.threshold is not None:
            ranked = [(score, i) for score, i in ranked if i in dense]
        top: list[str] = []
        while ranked and len(top) < config.top_k:  # best first, by id on ties
            head = [i for _, i in heapq.nsmallest(config.top_k - len(top), ranked)]
            if missing := [i for i in head if i not in threads]:
                found = yield from call(Storage.get_messages, missing)
                threads |= {m.id: m.thread_id for m in found if in_scope(m)}
            top += [i for i in head if i in threads]  # one deleted since drops out
            taken = set(head) if missing else None  # without one missing, the top is full
            ranked = [(score, i) for score, i in ranked if i not in taken] if taken else []
        keyword_scores = dict(keyword)
        return [
            Hit(
                i,
                threads[i],
                scores[i],
                dense_score=dense[i].score if i in dense else None,
                keyword_score=keyword_scores.get(i),
                context_score=context[i].score if i in context else None,
            )
            for i in top
        ]

    def _passing(self, ids: list[str], node: Node) -> Steps[list[Message]]:
        """The stored messages among `ids` that pass the filter `node`."""
        found = (yield from call(Storage.get_messages, ids)) if ids else []
        threads = {}
        for t in {m.thread_id for m in found}:
            threads[t] = yield from call(Storage.get_thread, t)
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
        config: SemanticRecallConfig | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> Recalled:
        """Search, then fetch every hit's neighbours in one storage round trip. Raises."""
        steps = self.recall_steps(query, thread_id, resource_id, config, exclude)
        return run(steps, self._backends)

    def recall_steps(
        self,
        query: str,
        thread_id: str,
        resource_id: str | None,
        config: SemanticRecallConfig | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> Steps[Recalled]:
        config = config or self.config.recall_or_default
        hits = yield from self.search_steps(query, thread_id, resource_id, config)
        if not hits:
            return Recalled([], [])
        span = config.message_range
        windows = yield from call(
            Storage.message_windows,
            [Include(id=h.message_id, before=span.before, after=span.after) for h in hits],
            resource_id=resource_id,
        )
        recalled = [
            m.model_copy(update={"source": "memory"}) for m in windows if m.id not in exclude
        ]
        return Recalled(hits, recalled)

    def merge(
        self, messages: list[Message], recalled: list[Message], thread_id: str
    ) -> list[Message]:
        """The input with recalled messages added: this thread's in chronological
        order, other threads' in one system message after the input's own."""
        return run(self.merge_steps(messages, recalled, thread_id), self._backends)

    def merge_steps(
        self, messages: list[Message], recalled: list[Message], thread_id: str
    ) -> Steps[list[Message]]:
        if not recalled:
            return messages
        same = [m for m in recalled if m.thread_id == thread_id]
        other = [m for m in recalled if m.thread_id != thread_id]
        system = [m for m in messages if m.role == "system"]
        conversation = merge_chronologically([m for m in messages if m.role != "system"], same)
        if other:
            threads = {}
            for t in dict.fromkeys(m.thread_id for m in other):
                if (thread := (yield from call(Storage.get_thread, t))) is not None:
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

    # ---- the processor ---------------------------------------------------------------

    def process_input(self, messages: list[Message], context: RequestContext) -> list[Message]:
        """Add what the last user message recalls. Fails open: errors are logged."""
        return run(self.process_input_steps(messages, context), self._backends)

    def process_input_steps(
        self, messages: list[Message], context: RequestContext
    ) -> Steps[list[Message]]:
        try:
            return (yield from self.add_recalled_steps(messages, context))
        except Exception:
            self.log.exception("semantic recall failed; the input goes on unchanged")
            return messages

    def add_recalled(self, messages: list[Message], context: RequestContext) -> list[Message]:
        """`process_input`, raising instead of failing open."""
        return run(self.add_recalled_steps(messages, context), self._backends)

    def add_recalled_steps(
        self, messages: list[Message], context: RequestContext
    ) -> Steps[list[Message]]:
        config = self.config.merged(context.config).semantic_recall
        query = next((m.text for m in reversed(messages) if m.role == "user"), "")
        if not config or not query.strip():
            return messages
        resource_id = context.resource_id
        if resource_id is None and config.scope == "resource":
            thread = yield from call(Storage.get_thread, context.thread_id)
            resource_id = thread.resource_id if thread else None
        recalled = yield from self.recall_steps(
            query, context.thread_id, resource_id, config, exclude={m.id for m in messages}
        )
        return (yield from self.merge_steps(messages, recalled.messages, context.thread_id))

    def process_output_result(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """Index the new messages (not those memory added). Failures are logged."""
        return run(self.process_output_steps(messages, context), self._backends)

    def process_output_steps(
        self, messages: list[Message], context: RequestContext
    ) -> Steps[list[Message]]:
        config = self.config.merged(context.config).semantic_recall
        if config:
            yield from self.index_steps([m for m in messages if m.source is None], config)
        return messages


def vector_metadata(message: Message, thread: Thread | None) -> dict[str, Any]:
    """What every vector of a message carries but its `chunk`: the thread's metadata,
    then the reserved keys, which win."""
    return {
        **normalize_metadata(thread.metadata if thread else {}, "thread metadata"),
        "message_id": message.id,
        "thread_id": message.thread_id,
        "resource_id": message.resource_id or (thread.resource_id if thread else None),
        "role": message.role,
        "created_at": epoch_ms(message.created_at),
    }


def chunk_id(message_id: str, k: int, count: int) -> str:
    """A chunk's vector id: the message id for a single chunk, `<message id>#<k>` otherwise."""
    return message_id if count == 1 else f"{message_id}#{k}"


def merge_chronologically(messages: list[Message], recalled: list[Message]) -> list[Message]:
    """Insert recalled messages into a conversation by (created_at, id), keeping its order."""
    out: list[Message] = []
    pending = sorted(recalled, key=lambda m: m.sort_key)
    for m in messages:
        while pending and pending[0].sort_key < m.sort_key:
            out.append(pending.pop(0))
        out.append(m)
    return [*out, *pending]
