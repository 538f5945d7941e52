"""SemanticRecall: embed saved messages; recall similar ones with their neighbours.

Usable on its own in any agent loop (`process_input` before the model call,
`process_output_result` after it) or through `Memory`, which builds it and
runs the same code for `Memory.recall`. Behaviour: docs/spec/semantic-recall.md.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.calls import Steps, call, run
from recallstack.core.chunking import chunk_text
from recallstack.core.config import HybridConfig, MemoryConfig, SemanticRecallConfig
from recallstack.core.cross_thread import render
from recallstack.core.embedder import Embedder, index_name
from recallstack.core.embedding_cache import CachedEmbedder
from recallstack.core.errors import EmbeddingRefusedError, IndexNotFoundError, InvalidInputError
from recallstack.core.filters import Condition, and_filters, matches
from recallstack.core.inputs import MAX_QUERY_LENGTH, check_id, check_text
from recallstack.core.messages import Message
from recallstack.core.metadata import epoch_ms, normalize_metadata
from recallstack.core.processor import RequestContext
from recallstack.core.records import Include, Thread
from recallstack.core.storage import Storage
from recallstack.core.vector_store import VectorStore

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

    def index_names(self) -> list[str]:
        """Indexes that may hold this memory's vectors: those recorded in storage and
        the current one, where they exist."""
        return run(self.index_names_steps(), self._backends)

    def index_names_steps(self) -> Steps[list[str]]:
        recorded = {*(yield from call(Storage.index_names)), self.index_name()}
        return sorted(recorded & set((yield from call(VectorStore.list_indexes))))

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
        try:
            refused = yield from self._write(
                name, list(messages), config, new, dict(threads or {}), known or {}
            )
        except Exception as exc:
            self._ready.discard(name)
            self.log.exception("semantic recall: indexing %d messages failed", len(messages))
            return IndexReport(failed=[m.id for m in messages], error=str(exc))
        done = [m.id for m in messages if m.id not in refused]
        yield from call(Storage.mark_indexed, done, name)
        if not refused:
            return IndexReport(indexed=done)
        first = next(iter(refused))
        self.log.error(
            "semantic recall: %d messages refused, %s: %s", len(refused), first, refused[first]
        )
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        error = f"message {first!r}: {refused[first]}{more}"
        return IndexReport(done, list(refused), error, refused=list(refused))

    def _write(
        self,
        name: str,
        messages: list[Message],
        config: SemanticRecallConfig,
        new: Collection[str],
        threads: dict[str, Thread],
        known: Mapping[str, Sequence[float]],
    ) -> Steps[dict[str, str]]:
        """Upsert every chunk's vector, then delete the chunks a message no longer has:
        new vectors exist before old ones go, and a save of new messages deletes nothing.

        Returns the messages the embedder refused a chunk of, with why: none of
        their vectors is touched.
        """
        ids: list[str] = []
        texts: list[str] = []
        metadata: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        for m in messages:
            chunks = self.chunks_of(m, config)
            counts[m.id] = len(chunks)
            if not chunks:
                continue
            if m.thread_id not in threads:
                found = yield from call(Storage.get_thread, m.thread_id)
                if found is not None:
                    threads[m.thread_id] = found
            common = vector_metadata(m, threads.get(m.thread_id))
            for k, chunk in enumerate(chunks):
                ids.append(chunk_id(m.id, k, len(chunks)))
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

    # ---- deleting --------------------------------------------------------------------

    def delete_vectors(
        self, names: Sequence[str], message_ids: Sequence[str] = (), *, thread_id: str | None = None
    ) -> None:
        """Delete these messages' (or this thread's) vectors in the indexes `names`
        (`index_names()`, read before the ledger records go)."""
        run(self.delete_vectors_steps(names, message_ids, thread_id=thread_id), self._backends)

    def delete_vectors_steps(
        self, names: Sequence[str], message_ids: Sequence[str] = (), *, thread_id: str | None = None
    ) -> Steps[None]:
        for name in names:
            if thread_id is not None:
                in_thread = Condition(("thread_id",), "$eq", thread_id)
                yield from call(VectorStore.delete, name, filter=in_thread)
            for ids in batched(message_ids, self.vector.capabilities.max_filter_values):
                in_ids = Condition(("message_id",), "$in", tuple(ids))
                yield from call(VectorStore.delete, name, filter=in_ids)
            yield from call(VectorStore.wait_until_consistent, name)

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
        hybrid = config.hybrid
        pool = max(config.top_k, hybrid.candidates) if hybrid else config.top_k
        best: dict[str, Hit] = {}
        name = self.index_name(config)
        threshold = config.threshold
        for vector in (yield from call(CachedEmbedder.embed, chunks)):
            try:
                results = yield from call(
                    VectorStore.query, name, vector, pool, filter=combined, min_score=threshold
                )
            except IndexNotFoundError:
                return []  # nothing was ever saved under this embedder
            for r in results:
                message_id = str(r.metadata["message_id"])
                if message_id not in best or r.score > best[message_id].score:
                    thread = str(r.metadata["thread_id"])
                    best[message_id] = Hit(message_id, thread, r.score, dense_score=r.score)
        ranked = sorted(best.values(), key=lambda h: (-h.score, h.message_id))
        if hybrid:
            ranked = yield from self._fuse(ranked, query, thread_id, resource_id, config, hybrid)
        return ranked[: config.top_k]

    def _fuse(
        self,
        dense: list[Hit],
        query: str,
        thread_id: str | None,
        resource_id: str | None,
        config: SemanticRecallConfig,
        hybrid: HybridConfig,
    ) -> Steps[list[Hit]]:
        """Reciprocal rank fusion of the semantic hits and the storage's keyword hits.

        A keyword hit must pass the scope and the filter (checked on the metadata
        its vectors carry), and with a `threshold` it must also be a semantic hit:
        the threshold stays a floor on semantic similarity."""
        if resource_id is None:
            thread = yield from call(Storage.get_thread, str(thread_id))
            resource_id = thread.resource_id if thread else None
        if resource_id is None:
            return dense
        in_thread = thread_id if config.scope == "thread" else None
        words = yield from call(
            Storage.search_words,
            query,
            resource_id=resource_id,
            thread_id=in_thread,
            limit=hybrid.candidates,
        )
        semantic = {h.message_id: h for h in dense}
        if config.threshold is not None:
            words = [(i, score) for i, score in words if i in semantic]
        found = yield from call(Storage.get_messages, [i for i, _ in words])
        messages = {m.id: m for m in found}
        if config.filter_node is not None:
            threads = {}
            for t in {m.thread_id for m in messages.values()}:
                threads[t] = yield from call(Storage.get_thread, t)
            messages = {
                i: m
                for i, m in messages.items()
                if matches(
                    config.filter_node, {**vector_metadata(m, threads[m.thread_id]), "chunk": 0}
                )
            }
        keyword = {
            i: (rank, score)
            for rank, (i, score) in enumerate(
                ((i, score) for i, score in words if i in messages), start=1
            )
        }
        dense_rank = {h.message_id: rank for rank, h in enumerate(dense, start=1)}
        fused: list[Hit] = []
        for message_id in {*dense_rank, *keyword}:
            score = 0.0
            if message_id in dense_rank:
                score += hybrid.weight / (hybrid.rrf_k + dense_rank[message_id])
            if message_id in keyword:
                score += (1 - hybrid.weight) / (hybrid.rrf_k + keyword[message_id][0])
            hit = semantic.get(message_id)
            fused.append(
                Hit(
                    message_id,
                    hit.thread_id if hit else messages[message_id].thread_id,
                    score,
                    dense_score=hit.dense_score if hit else None,
                    keyword_score=keyword[message_id][1] if message_id in keyword else None,
                )
            )
        return sorted(fused, key=lambda h: (-h.score, h.message_id))

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
