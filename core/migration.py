"""Moving a memory between backends: export to JSON lines, import them, or migrate
from one store to another directly, resumable and verified.

A dump holds one record a line: `{"type": "resource" | "thread" | "message" |
"vectors", "data": {...}}`: every resource first (those that own no thread
included), then each thread before its messages, both in id order. With
vectors asked for, a `vectors` record (an index name and chunk id → vector)
comes before each page of messages; an importing memory of the same index
writes them instead of embedding, and any other embeds the messages, so a
dump moves between models as well as between backends. `migrate` copies
vectors the same way when both memories index with the same model.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from recallstack.core.calls import run
from recallstack.core.config import SemanticRecallConfig
from recallstack.core.errors import InvalidInputError, NotFoundError
from recallstack.core.memory import Memory
from recallstack.core.messages import Message
from recallstack.core.records import Resource, Thread
from recallstack.core.semantic_recall import Hit, SemanticRecall, chunk_id
from recallstack.core.storage import Storage

PAGE = 500
"""Threads read, and messages read and saved, per call."""
SAMPLES = 5
"""Threads whose first message is searched on both sides when a migration is verified."""

TIE = 1e-4
"""Scores this close are a tie when two backends' hits are compared."""

Progress = Callable[[int, int], None]
"""`progress(done, total)`, in messages."""


class Vectors(BaseModel):
    """A dump's vectors of the page of messages that follows, by chunk id, of one index."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: str
    chunks: dict[str, list[float]]


Record = tuple[
    Literal["resource", "thread", "message", "vectors"], Resource | Thread | Message | Vectors
]


def threads_of(storage: Storage) -> Iterator[Thread]:
    """Every thread of the store, in id order."""
    after = None
    while page := storage.all_threads(after=after, limit=PAGE):
        yield from page
        after = page[-1].id


def messages_of(storage: Storage, thread_id: str) -> Iterator[list[Message]]:
    """A thread's messages, oldest first, a page at a time."""
    page = 0
    while batch := storage.list_messages(thread_id, page=page, per_page=PAGE, order="asc").items:
        yield batch
        page += 1


def resources_of(storage: Storage) -> Iterator[Resource]:
    """Every resource record of the store, in id order."""
    after = None
    while page := storage.all_resources(after=after, limit=PAGE):
        yield from page
        after = page[-1].id


def records(storage: Storage, vectors: VectorSource | None = None) -> Iterator[Record]:
    """What a dump holds, in its order; with `vectors`, theirs before each page."""
    for resource in resources_of(storage):
        yield "resource", resource
    for thread in threads_of(storage):
        yield "thread", thread
        for batch in messages_of(storage, thread.id):
            if vectors is not None and (known := vectors.chunks(batch)[0]):
                yield "vectors", Vectors(index=vectors.name, chunks=known)
            for message in batch:
                yield "message", message


def export_lines(storage: Storage, vectors: VectorSource | None = None) -> Iterator[str]:
    """The dump of a store, one JSON line at a time."""
    for kind, record in records(storage, vectors):
        data = record.model_dump(mode="json")
        yield json.dumps({"type": kind, "data": data}, ensure_ascii=False)


_MODELS: dict[str, type[Resource] | type[Thread] | type[Message] | type[Vectors]] = {
    "resource": Resource,
    "thread": Thread,
    "message": Message,
    "vectors": Vectors,
}


def parse_lines(lines: Iterable[bytes]) -> list[Record]:
    """Every record of a dump, checked before anything is written: a line that is not
    one is an `InvalidInputError` naming the line."""
    found: list[Record] = []
    for number, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8")
            if not text.strip():
                continue
            entry = json.loads(text)
            if not isinstance(entry, dict) or entry.get("type") not in _MODELS:
                raise InvalidInputError(
                    'expected {"type": "resource|thread|message|vectors", "data": {...}}'
                )
            found.append((entry["type"], _MODELS[entry["type"]].model_validate(entry.get("data"))))
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"line {number}: not UTF-8 ({exc.reason})") from exc
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"line {number}: not JSON ({exc.msg})") from exc
        except (InvalidInputError, ValidationError) as exc:
            raise InvalidInputError(f"line {number}: {exc}") from exc
    return found


@dataclass
class Imported:
    """What `import_records` saved: messages, and how many of them with the dump's vectors."""

    messages: int = 0
    with_vectors: int = 0


def import_records(
    memory: Memory, found: list[Record], progress: Progress | None = None
) -> Imported:
    """Save the records into `memory`: messages with the dump's vectors where they are of
    its index, embedded by it otherwise. Vectors of its index that do not fit it are
    refused before anything is written."""
    name = memory.semantic.index_name() if memory.semantic is not None else None
    usable = [r for _, r in found if isinstance(r, Vectors) and r.index == name]
    if memory.semantic is not None:
        _check_vectors(usable, memory.semantic.embedder.embedder.dimension)
    total = sum(kind == "message" for kind, _ in found)
    result = Imported()
    known: dict[str, list[float]] = {}
    batch: list[Message] = []

    def flush() -> None:
        if batch:
            saved = run(memory._ops.save_messages(batch, None, known), memory._backends)
            result.messages += len(batch)
            if memory.semantic is not None and known:
                copied = {m.id for m in batch if _has_all(memory.semantic, m, known)}
                result.with_vectors += len(copied.intersection(saved.indexed))
            batch.clear()
            if progress is not None:
                progress(result.messages, total)

    for _, record in found:
        if isinstance(record, Message):
            batch.append(record)
            if len(batch) >= PAGE:
                flush()
            continue
        flush()  # a thread's messages are saved after the thread
        if isinstance(record, Vectors):
            known = dict(record.chunks) if record.index == name else {}
        elif isinstance(record, Thread):
            memory.storage.save_thread(record)
        elif isinstance(record, Resource):
            memory.storage.save_resource(record)
    flush()
    return result


def _has_all(semantic: SemanticRecall, message: Message, known: dict[str, list[float]]) -> bool:
    """Whether `known` holds a vector of each of the message's chunks."""
    n = len(semantic.chunks_of(message))
    return n > 0 and all(chunk_id(message.id, k, n) in known for k in range(n))


def _check_vectors(found: list[Vectors], dimension: int) -> None:
    for record in found:
        for chunk, vector in record.chunks.items():
            if len(vector) != dimension or not all(math.isfinite(x) for x in vector):
                raise InvalidInputError(
                    f"the vectors of chunk {chunk!r} ({record.index}): expected "
                    f"{dimension} finite numbers"
                )


@dataclass
class Migration:
    """What `migrate` did and what its check found."""

    threads: int = 0
    messages: int = 0
    copied_threads: int = 0
    copied_messages: int = 0
    copied_vectors: int = 0
    """Messages whose vectors were copied from the source rather than embedded."""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    sampled: int = 0

    @property
    def verified(self) -> bool:
        return not self.problems


def sizes_of(storage: Storage) -> dict[str, int]:
    """Each thread's message count."""
    return {t.id: storage.list_messages(t.id, per_page=0).total for t in threads_of(storage)}


def migrate(source: Memory, target: Memory, progress: Progress | None = None) -> Migration:
    """Copy every resource, thread and message of `source` into `target`, then check
    both sides agree. When both index with the same model (the same index name),
    the source's vectors are copied; what the source has no current vectors for
    is embedded by the target.

    Resumable: a thread the target already holds with as many messages is
    skipped, so running it again after an interruption copies what is left
    (saves are upserts by id), and a final `reindex` indexes any message a
    killed run stored without its vectors.
    """
    started = time.perf_counter()
    sizes = sizes_of(source.storage)
    result = Migration(threads=len(sizes), messages=sum(sizes.values()))
    done = reported = 0
    vectors = VectorSource.of(source, target)
    for resource in resources_of(source.storage):
        target.storage.save_resource(resource)
    for thread in threads_of(source.storage):
        size = sizes.get(thread.id, 0)
        there = target.storage.get_thread(thread.id)
        if there is not None and target.storage.list_messages(thread.id, per_page=0).total == size:
            done += size
            continue
        target.storage.save_thread(thread)
        for batch in messages_of(source.storage, thread.id):
            known, complete = vectors.chunks(batch) if vectors is not None else ({}, set())
            saved = run(target._ops.save_messages(batch, None, known), target._backends)
            result.copied_vectors += len(complete.intersection(saved.indexed))
            done += len(batch)
            result.copied_messages += len(batch)
            if progress is not None and done - reported >= PAGE:
                progress(done, result.messages)
                reported = done
        result.copied_threads += 1
    if progress is not None:
        progress(done, result.messages)
    if target.semantic is not None:
        target.reindex()
    result.seconds = time.perf_counter() - started
    verify(source, target, sizes, result)
    return result


class VectorSource:
    """Where `migrate` copies vectors from: the source's index, when the target indexes
    with the same model."""

    def __init__(self, semantic: SemanticRecall, name: str, stale: set[str]) -> None:
        self.semantic = semantic
        self.name = name
        self.stale = stale
        """Messages the source's ledger does not record as indexed: their vectors may be
        missing or of an older text, so the target embeds them."""

    @classmethod
    def of(cls, source: Memory, target: Memory) -> VectorSource | None:
        """None when the two memories do not index with the same model."""
        mine, theirs = source.semantic, target.semantic
        if mine is None or theirs is None:
            return None
        name = mine.index_name()
        overlap = mine.config.recall_or_default.chunk_overlap
        if (
            name != theirs.index_name()
            or overlap != theirs.config.recall_or_default.chunk_overlap  # the same chunks
            or name not in mine.vector.list_indexes()
        ):
            return None
        stale: set[str] = set()
        after = None
        while batch := source.storage.unindexed(name, limit=PAGE, after=after):
            stale.update(m.id for m in batch)
            after = batch[-1]
        return cls(mine, name, stale)

    def chunks(self, messages: list[Message]) -> tuple[dict[str, list[float]], set[str]]:
        """The stored vectors of these messages' chunks, by chunk id, and the messages
        all of whose chunks were found (the others are embedded)."""
        expected = {m.id: len(self.semantic.chunks_of(m)) for m in messages}
        wanted = {i: n for i, n in expected.items() if n and i not in self.stale}
        store = self.semantic.vector
        limits = store.capabilities
        probe = [1.0] * self.semantic.embedder.embedder.dimension  # any vector: all match
        found: dict[str, list[float]] = {}
        owner: dict[str, str] = {}
        for group in _groups(wanted, limits.max_filter_values, limits.max_top_k):
            top_k = min(sum(wanted[i] for i in group), limits.max_top_k)
            for hit in store.query(
                self.name,
                probe,
                top_k,
                filter={"message_id": {"$in": group}},
                include_vector=True,
            ):
                if hit.vector is not None:
                    found[hit.id] = hit.vector
                    owner[hit.id] = str(hit.metadata["message_id"])
        counts = Counter(owner.values())
        complete = {i for i, n in wanted.items() if counts[i] == n}
        return {c: v for c, v in found.items() if owner[c] in complete}, complete


def _groups(sizes: dict[str, int], most_ids: int, most_chunks: int) -> Iterator[list[str]]:
    """Message ids in groups of at most `most_ids`, holding at most `most_chunks` chunks
    (or one message, however many it has)."""
    group: list[str] = []
    chunks = 0
    for message_id, n in sizes.items():
        if group and (len(group) >= most_ids or chunks + n > most_chunks):
            yield group
            group, chunks = [], 0
        group.append(message_id)
        chunks += n
    if group:
        yield group


def verify(source: Memory, target: Memory, sizes: dict[str, int], result: Migration) -> None:
    """Each of the source's threads (`sizes`: its message counts) holds as many messages
    in the target, and a search of the first message of a few threads finds the same
    messages on both sides (when both have vectors of the model)."""
    differ = [
        thread_id
        for thread_id, size in sizes.items()
        if target.storage.get_thread(thread_id) is None
        or target.storage.list_messages(thread_id, per_page=0).total != size
    ]
    if differ:
        result.problems.append(
            f"{len(differ)} threads differ in the target, e.g. {', '.join(map(repr, differ[:3]))}"
        )
    chosen = sorted(sizes)[:: max(1, len(sizes) // SAMPLES)][:SAMPLES]
    for thread_id in chosen:
        thread = source.storage.get_thread(thread_id)
        first = next(messages_of(source.storage, thread_id), [])
        query = next((m.text for m in first if m.text.strip()), None)
        if thread is None or query is None or source.semantic is None or target.semantic is None:
            continue
        try:
            theirs = _semantic_search(source, thread.resource_id, query)
        except NotFoundError:  # the source has no vectors of this model
            continue
        ours = _semantic_search(target, thread.resource_id, query)
        result.sampled += 1
        if not _same_hits(ours, theirs):
            result.problems.append(
                f"a search of {thread.resource_id!r} found "
                f"{[h.message_id for h in ours]} here and {[h.message_id for h in theirs]} "
                "in the source"
            )


def _semantic_search(memory: Memory, resource_id: str, query: str) -> list[Hit]:
    """The top 5 by the messages' own vectors alone, whatever either memory fuses or
    filters with: what a copy of the vectors must give alike."""
    assert memory.semantic is not None
    options = memory.config.recall_or_default.model_dump()
    plain = {"top_k": 5, "scope": "resource", "hybrid": False, "filter": None, "threshold": None}
    config = SemanticRecallConfig.model_validate({**options, **plain})
    return memory.semantic.search(query, None, resource_id, config)


def _same_hits(ours: list[Hit], theirs: list[Hit]) -> bool:
    """The same messages at each rank, but where two scores are within `TIE` (backends
    round distances differently, so near-ties may come in either order)."""
    return len(ours) == len(theirs) and all(
        a.message_id == b.message_id or abs(a.score - b.score) <= TIE
        for a, b in zip(ours, theirs, strict=True)
    )


def describe(result: Migration) -> dict[str, Any]:
    """The migration's figures, for the CLI."""
    rate = result.copied_messages / result.seconds if result.seconds else 0.0
    return {**result.__dict__, "verified": result.verified, "messages_per_second": rate}
