"""Indexing: a message's chunks embedded and upserted, stale chunks deleted, the ledger
written last; contextual vectors beside them (docs/spec/semantic-recall.md §4)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from recallstack.core.batching import batched
from recallstack.core.contracts.embedder import Tokenized
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import EmbeddingRefusedError
from recallstack.core.filters import Condition, and_filters
from recallstack.core.messages import Message
from recallstack.core.recall.chunking import chunks
from recallstack.core.recall.derived import context_text, contexts, digest
from recallstack.core.recall.indexes import context_index, main_index
from recallstack.core.recall.records import IndexReport, chunk_id, vector_metadata
from recallstack.core.records import Thread
from recallstack.core.runtime.config import SemanticRecallConfig
from recallstack.core.runtime.embedding_cache import CachedEmbedder
from recallstack.core.runtime.tracing import note, span
from recallstack.core.vectors import Matrix, Partition

CONTEXT_CHECKS = 3
"""How many times a save reads contexts again after writing them (`_write_contexts`)."""


def chunks_of(
    embedder: CachedEmbedder, message: Message, config: SemanticRecallConfig
) -> list[Tokenized]:
    """What is embedded of a message: its text's chunks; none of a system message."""
    if message.role == "system":
        return []
    return chunks(embedder, message.text, config.chunk_overlap)


class Indexing:
    """Writes messages' vectors; remembers which indexes it has made, so that each is
    created once per process."""

    def __init__(
        self,
        storage: Storage,
        vector: VectorStore,
        embedder: CachedEmbedder,
        log: logging.Logger,
    ) -> None:
        self.storage = storage
        self.vector = vector
        self.embedder = embedder
        self.log = log
        self._ready: set[str] = set()

    def index(
        self,
        messages: Sequence[Message],
        config: SemanticRecallConfig,
        new: Collection[str] = (),
        threads: Mapping[str, Thread] | None = None,
        known: Mapping[str, Matrix] | None = None,
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
        with span("index", messages=len(messages)) as current:
            report = self._index(messages, config, new, threads, known)
            note(current, indexed=len(report.indexed), failed=len(report.failed))
            return report

    def _index(
        self,
        messages: Sequence[Message],
        config: SemanticRecallConfig,
        new: Collection[str],
        threads: Mapping[str, Thread] | None,
        known: Mapping[str, Matrix] | None,
    ) -> IndexReport:
        model = self.embedder.embedder
        name, context_name = main_index(config, model), context_index(config, model)
        messages = list(messages)
        threads = dict(threads or {})
        also: dict[str, str] = {}
        unsettled: dict[str, str] = {}
        try:
            own = {m.id: chunks_of(self.embedder, m, config) for m in messages}
            refused = self._write(name, messages, config, own, {}, new, threads, known or {})
            if context_name is not None:
                also, unsettled = self._write_contexts(
                    context_name, messages, own, config, new, threads
                )
        except Exception as exc:
            self._ready -= {name, context_name}
            self.log.exception("semantic recall: indexing %d messages failed", len(messages))
            return IndexReport(failed=[m.id for m in messages], error=str(exc))
        also = {
            i: f"its contextual text, with the text before it: {why}" for i, why in also.items()
        }
        failed = {**also, **unsettled, **refused}
        done = [m.id for m in messages if m.id not in failed]
        with span("ledger.write", messages=len(done)):
            # a message's own vectors are current even when its contextual one failed
            # (the text before it refused, say): recall finds it by them meanwhile
            self.storage.mark_indexed([m.id for m in messages if m.id not in refused], name)
            if context_name is not None:
                self.storage.mark_indexed(done, context_name)
        if not failed:
            return IndexReport(indexed=done)
        first = next(iter(failed))
        self.log.error(
            "semantic recall: %d messages not indexed, %s: %s", len(failed), first, failed[first]
        )
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        error = f"message {first!r}: {failed[first]}{more}"
        return IndexReport(done, list(failed), error, refused=list({**also, **refused}))

    def _write_contexts(
        self,
        name: str,
        messages: list[Message],
        own: Mapping[str, list[Tokenized]],
        config: SemanticRecallConfig,
        new: Collection[str],
        threads: dict[str, Thread],
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Write the messages' contextual vectors, then read their contexts again: a
        save running beside this one may have changed one after it was read (its own
        rewrite then lost to this older one). Those are written again, so the last
        writer of a vector always checks after it. Returns the refused messages, and
        those whose context still changed after `CONTEXT_CHECKS` rounds (left for
        `reindex()`)."""
        raw, previous = self._contexts(messages, own, config)
        texts = self._chunked(raw, config)
        refused = self._write(name, messages, config, texts, previous, new, threads, {})
        todo = [m for m in messages if m.id not in refused]
        for _ in range(CONTEXT_CHECKS):
            again, after = self._contexts(todo, own, config)
            todo = [m for m in todo if after[m.id] != previous[m.id]]  # its digest changed
            if not todo:
                return refused, {}
            texts |= self._chunked({m.id: again[m.id] for m in todo}, config)
            previous |= after
            refused |= self._write(name, todo, config, texts, previous, (), threads, {})
            todo = [m for m in todo if m.id not in refused]
        why = "its context changed while it was written; reindex() writes it"
        return refused, dict.fromkeys((m.id for m in todo), why)

    def _contexts(
        self,
        messages: list[Message],
        own: Mapping[str, list[Tokenized]],
        config: SemanticRecallConfig,
    ) -> tuple[dict[str, str | None], dict[str, dict[str, Any]]]:
        """Each message's contextual text (`derived.contexts`); and, as vector metadata,
        the message just before it (`previous_id`), which a contextual hit credits, and
        the text's digest, by which `doctor` tells a stale vector. A message with no
        chunks of its own (`own`) has none."""
        embedded = [m for m in messages if own[m.id]]
        earlier = contexts(self.storage, embedded, config.context)
        texts: dict[str, str | None] = {}
        previous: dict[str, dict[str, Any]] = {}
        for m in messages:
            if not own[m.id]:
                texts[m.id], previous[m.id] = None, {}
                continue
            texts[m.id] = text = context_text(earlier[m.id], m)
            previous[m.id] = {"context_digest": digest(text)}
            if earlier[m.id]:
                previous[m.id]["previous_id"] = earlier[m.id][-1].id
        return texts, previous

    def _chunked(
        self, texts: Mapping[str, str | None], config: SemanticRecallConfig
    ) -> dict[str, list[Tokenized]]:
        """The contextual texts' chunks, tokenized only when they are to be written."""
        return {
            i: chunks(self.embedder, text, config.chunk_overlap) if text is not None else []
            for i, text in texts.items()
        }

    def _write(
        self,
        name: str,
        messages: list[Message],
        config: SemanticRecallConfig,
        texts: Mapping[str, list[Tokenized]],
        extra: Mapping[str, dict[str, Any]],
        new: Collection[str],
        threads: dict[str, Thread],
        known: Mapping[str, Matrix],
    ) -> dict[str, str]:
        """Upsert every chunk's vector, then delete the chunks a message no longer has:
        new vectors exist before old ones go, and a save of new messages deletes nothing.

        `texts` are the chunks embedded of each message, `extra` metadata its vectors
        carry besides `vector_metadata`. Returns the messages the embedder refused a
        chunk of, with why: none of their vectors is touched.
        """
        ids: list[str] = []
        inputs: list[Tokenized] = []
        metadata: list[dict[str, Any]] = []
        partitions: list[Partition] = []
        counts: dict[str, int] = {}
        owners: dict[str, str] = {}
        made: dict[tuple[str, str], Partition] = {}
        refused: dict[str, str] = {}
        for m in messages:
            if m.thread_id not in threads:
                found = self.storage.get_thread(m.thread_id)
                if found is not None:
                    threads[m.thread_id] = found
            thread = threads.get(m.thread_id)
            owner = m.resource_id or (thread.resource_id if thread else None)
            if owner is None:
                refused[m.id] = f"its thread {m.thread_id!r} does not exist"
                continue
            owners[m.id], counts[m.id] = owner, len(texts[m.id])
            common = {**vector_metadata(m, thread), **extra.get(m.id, {})}
            if (owner, m.thread_id) not in made:  # checked once, not once per chunk
                made[owner, m.thread_id] = Partition(owner, m.thread_id)
            partition = made[owner, m.thread_id]
            for k, chunk in enumerate(texts[m.id]):
                ids.append(chunk_id(m.id, k, len(texts[m.id])))
                inputs.append(chunk)
                metadata.append({**common, "chunk": k})
                partitions.append(partition)
        if not ids and name not in self._ready and name not in self.vector.list_indexes():
            return refused  # nothing to write, and no index that could hold stale chunks
        if name not in self._ready:
            dimension = self.embedder.embedder.dimension
            self.vector.create_index(name, dimension, config=config.index_config)
            self._ready.add(name)
        if ids:
            refused |= self._upsert(name, ids, inputs, metadata, partitions, known)
        new = set(new)
        self._delete_stale(
            name,
            {m: n for m, n in counts.items() if m not in new and m not in refused},
            owners,
        )
        self.vector.wait_until_consistent(name)  # the next recall reads it
        return refused

    def _upsert(
        self,
        name: str,
        ids: list[str],
        inputs: list[Tokenized],
        metadata: list[dict[str, Any]],
        partitions: list[Partition],
        known: Mapping[str, Matrix],
    ) -> dict[str, str]:
        """Embed the chunks not `known` and upsert every vector but those of a message
        the embedder refused a chunk of, one upsert per partition; returns those
        messages, with why."""
        vectors = np.empty((len(ids), self.embedder.embedder.dimension), dtype=np.float32)
        todo = [i for i, chunk in enumerate(ids) if chunk not in known]
        for i, chunk in enumerate(ids):
            if chunk in known:
                vectors[i] = known[chunk]
        refused: dict[str, str] = {}
        if todo:
            try:
                vectors[todo] = self.embedder.embed([inputs[i] for i in todo])
            except EmbeddingRefusedError as exc:
                vectors[todo] = exc.vectors
                refused = {
                    str(metadata[todo[i]]["message_id"]): why for i, why in exc.refused.items()
                }
        groups: dict[Partition, list[int]] = {}
        for i, row in enumerate(metadata):
            if row["message_id"] not in refused:
                groups.setdefault(partitions[i], []).append(i)
        for partition, keep in groups.items():
            with span("vector.upsert", index=name, vectors=len(keep)):
                self.vector.upsert(
                    name,
                    [ids[i] for i in keep],
                    vectors[keep],
                    [metadata[i] for i in keep],
                    partition=partition,
                )
        return refused

    def _delete_stale(self, name: str, counts: dict[str, int], owners: Mapping[str, str]) -> None:
        """Delete the chunks beyond each message's current count of `counts[id]`, in its
        resource (`owners`): a message may have moved there from another thread.

        Chunk ids are deterministic (`chunk_id`), so what may be stale is known
        without reading: chunks numbered from the count on, and the one id whose
        name changes between one chunk and several (`<id>` against `<id>#0`).
        """
        by_resource: dict[str, dict[str, int]] = {}
        for message_id, n in counts.items():
            by_resource.setdefault(owners[message_id], {})[message_id] = n
        for resource_id, held in by_resource.items():
            within = Partition(resource_id)
            renamed = [chunk_id(i, 0, 2 if n == 1 else 1) for i, n in held.items() if n > 0]
            if renamed:
                self.vector.delete(name, ids=renamed, partition=within)
            beyond: dict[int, list[str]] = {}
            for message_id, n in held.items():
                beyond.setdefault(n, []).append(message_id)
            for n, group in beyond.items():
                for ids in batched(group, self.vector.capabilities.max_filter_values):
                    stale = and_filters(
                        Condition(("message_id",), "$in", tuple(ids)),
                        Condition(("chunk",), "$gte", n),
                    )
                    self.vector.delete(name, filter=stale, partition=within)
