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
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from recallstack.core.api.memory import Memory
from recallstack.core.api.store_pages import PAGE, messages_of, resources_of, threads_of
from recallstack.core.api.vector_reads import held_messages
from recallstack.core.contracts.storage import Storage
from recallstack.core.errors import InvalidInputError, NotFoundError
from recallstack.core.inputs import json_line
from recallstack.core.messages import Message
from recallstack.core.recall import Hit, SemanticRecall
from recallstack.core.recall.derived import digest
from recallstack.core.recall.records import chunk_id
from recallstack.core.records import Resource, Thread
from recallstack.core.runtime.config import SemanticRecallConfig

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


Kind = Literal["resource", "thread", "message", "vectors"]
Record = tuple[Kind, Resource | Thread | Message | Vectors]
Line = tuple[Kind, Resource | Thread | Message | Vectors, int]
"""A record of a dump and the number of its line."""


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


def parse_lines(lines: Iterable[bytes]) -> list[Line]:
    """Every record of a dump, checked before anything is written: a line that is not
    one is an `InvalidInputError` naming the line."""
    found: list[Line] = []
    for number, line in enumerate(lines, start=1):
        entry = json_line(line, number)
        if entry is None:
            continue
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(kind, str) or kind not in _MODELS:
            raise InvalidInputError(
                f'line {number}: expected {{"type": "resource|thread|message|vectors", '
                '"data": {...}}'
            )
        try:
            record = _MODELS[kind].model_validate(entry.get("data"))
        except (InvalidInputError, ValidationError) as exc:
            raise InvalidInputError(f"line {number}: {exc}") from exc
        found.append((cast(Kind, kind), record, number))
    return found


@dataclass
class Imported:
    """What `import_records` saved: messages, and how many of them with the dump's vectors."""

    messages: int = 0
    with_vectors: int = 0


def import_records(memory: Memory, found: list[Line], progress: Progress | None = None) -> Imported:
    """Save the records into `memory`: messages with the dump's vectors where they are of
    its index, embedded by it otherwise. All or nothing: the whole dump is checked
    against the store first (`check_dump`), and a refusal writes nothing."""
    name = memory.semantic.index_name() if memory.semantic is not None else None
    dimension = memory.semantic.embedder.embedder.dimension if memory.semantic else None
    check_dump(memory.storage, found, name, dimension)
    total = sum(kind == "message" for kind, _, _ in found)
    result = Imported()
    known: dict[str, list[float]] = {}
    batch: list[Message] = []

    def flush() -> None:
        if batch:
            saved = memory.save_messages(batch, vectors=known)
            result.messages += len(batch)
            if memory.semantic is not None and known:
                copied = {m.id for m in batch if _has_all(memory.semantic, m, known)}
                result.with_vectors += len(copied.intersection(saved.indexed))
            batch.clear()
            if progress is not None:
                progress(result.messages, total)

    for _, record, _ in found:
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


def check_dump(
    storage: Storage, found: list[Line], index: str | None, dimension: int | None
) -> None:
    """Refuse, naming the line, what the store would refuse or what would break the
    import half-way: a repeated id, a thread or message id another resource owns in
    the store, a message of no thread, a message whose resource is not its thread's,
    and vectors that are not finite, non-zero and of the index's dimension."""
    threads: dict[str, str] = {}
    """Thread id → its resource, from the dump or the store."""
    seen: dict[str, dict[str, int]] = {"resource": {}, "thread": {}, "message": {}}
    owners: dict[str, tuple[str, int]] = {}
    """Message id → (the resource it is saved under, its line)."""
    for kind, record, line in found:
        if isinstance(record, Vectors):
            _check_vectors(record, line, dimension if record.index == index else None)
            continue
        if record.id in seen[kind]:
            raise InvalidInputError(
                f"line {line}: {kind} {record.id!r} is on line {seen[kind][record.id]} already"
            )
        seen[kind][record.id] = line
        if isinstance(record, Thread):
            stored = storage.get_thread(record.id)
            if stored is not None and stored.resource_id != record.resource_id:
                raise InvalidInputError(
                    f"line {line}: thread {record.id!r} belongs to another resource in the store"
                )
            threads[record.id] = record.resource_id
        elif isinstance(record, Message):
            if record.thread_id not in threads:
                stored = storage.get_thread(record.thread_id)
                if stored is None:
                    raise InvalidInputError(
                        f"line {line}: message {record.id!r}: thread {record.thread_id!r} is "
                        "neither in the dump (before it) nor in the store"
                    )
                threads[record.thread_id] = stored.resource_id
            owner = threads[record.thread_id]
            if record.resource_id not in (None, owner):
                raise InvalidInputError(
                    f"line {line}: message {record.id!r}: resource {record.resource_id!r} "
                    f"differs from its thread's {owner!r}"
                )
            owners[record.id] = (owner, line)
    ids = list(owners)
    for start in range(0, len(ids), PAGE):
        for stored_message in storage.get_messages(ids[start : start + PAGE]):
            owner, line = owners[stored_message.id]
            if stored_message.resource_id != owner:
                raise InvalidInputError(
                    f"line {line}: message {stored_message.id!r} belongs to another resource "
                    "in the store"
                )


def _has_all(semantic: SemanticRecall, message: Message, known: dict[str, list[float]]) -> bool:
    """Whether `known` holds a vector of each of the message's chunks."""
    n = len(semantic.chunks_of(message))
    return n > 0 and all(chunk_id(message.id, k, n) in known for k in range(n))


def _check_vectors(record: Vectors, line: int, dimension: int | None) -> None:
    """Finite, non-zero, and of `dimension` where the vectors are of the importing index."""
    for chunk, vector in record.chunks.items():
        wrong = (
            (dimension is not None and len(vector) != dimension)
            or not all(math.isfinite(x) for x in vector)
            or not any(vector)
        )
        if wrong:
            size = f"{dimension} " if dimension is not None else ""
            raise InvalidInputError(
                f"line {line}: the vectors of chunk {chunk!r} ({record.index}): expected "
                f"{size}finite numbers, not all zero"
            )


@dataclass
class Migration:
    """What `migrate` did and what its check found."""

    threads: int = 0
    messages: int = 0
    copied_threads: int = 0
    """Threads whose record was written (new or changed)."""
    copied_messages: int = 0
    """Messages written: new in the target, or changed since they were copied."""
    copied_vectors: int = 0
    """Messages whose vectors were copied from the source rather than embedded."""
    removed_threads: int = 0
    removed_messages: int = 0
    """What the target held of the source's resources that the source no longer does."""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    sampled: int = 0
    checked: int = 0
    """Messages whose content and vectors the check compared."""

    @property
    def verified(self) -> bool:
        return not self.problems


def sizes_of(storage: Storage) -> dict[str, int]:
    """Each thread's message count."""
    return {t.id: storage.list_messages(t.id, per_page=0).total for t in threads_of(storage)}


def message_digest(message: Message) -> str:
    """What a copy must keep of a message: its text and parts, role, thread, owner,
    metadata and time."""
    data = message.model_dump(mode="json")
    return digest(json.dumps(data, sort_keys=True, ensure_ascii=False))


def thread_digest(thread: Thread) -> str:
    """What a copy must keep of a thread: its owner, title and metadata."""
    kept = {"resource_id": thread.resource_id, "title": thread.title, "metadata": thread.metadata}
    return digest(json.dumps(kept, sort_keys=True, ensure_ascii=False))


def migrate(source: Memory, target: Memory, progress: Progress | None = None) -> Migration:
    """Make `target` a copy of `source`'s resources, then check both sides agree, message
    by message. When both index with the same model (the same index name), the
    source's vectors are copied; what the source has no current vectors for is
    embedded by the target.

    Run again, it copies what differs: threads and messages whose content
    (`message_digest`, `thread_digest`) is new or changed, or whose vectors the
    target lacks, and it removes from the target the threads and messages of the
    source's resources that the source no longer has (a resource the source holds
    no thread of is not touched: nothing tells it from the target's own). So a run
    resumes an interrupted one, and a final `reindex` indexes any message a killed
    run stored without its vectors.
    """
    started = time.perf_counter()
    result = Migration()
    vectors = VectorSource.of(source, target)
    for resource in resources_of(source.storage):
        target.storage.save_resource(resource)
    owners: set[str] = set()
    done = reported = 0
    total = sum(sizes_of(source.storage).values())
    for thread in threads_of(source.storage):
        result.threads += 1
        owners.add(thread.resource_id)
        there = target.storage.get_thread(thread.id)
        if there is None or thread_digest(there) != thread_digest(thread):
            target.storage.save_thread(thread)  # replaces its record, keeps its messages
            result.copied_threads += 1
        theirs = {
            m.id: message_digest(m) for page in messages_of(target.storage, thread.id) for m in page
        }
        for batch in messages_of(source.storage, thread.id):
            result.messages += len(batch)
            done += len(batch)
            changed = [m for m in batch if theirs.pop(m.id, None) != message_digest(m)]
            changed += _without_vectors(target, [m for m in batch if m not in changed])
            if changed:
                known, complete = vectors.chunks(changed) if vectors is not None else ({}, set())
                saved = target.save_messages(changed, vectors=known)
                result.copied_vectors += len(complete.intersection(saved.indexed))
                result.copied_messages += len(changed)
            if progress is not None and done - reported >= PAGE:
                progress(done, total)
                reported = done
        result.removed_messages += _remove_gone(source, target, list(theirs))
    for resource_id in sorted(owners):
        result.removed_threads += _remove_threads(source, target, resource_id)
    if progress is not None:
        progress(done, total)
    if target.semantic is not None:
        target.reindex()
    result.seconds = time.perf_counter() - started
    verify(source, target, result)
    return result


def _without_vectors(target: Memory, messages: list[Message]) -> list[Message]:
    """Of messages the target holds as they are, those its index lacks vectors of (a
    copy damaged since): they are copied again."""
    store, semantic = target.vector, target.semantic
    if store is None or semantic is None or not messages:
        return []
    name = semantic.index_name()
    if name not in store.list_indexes():
        return []
    held = held_messages(store, name, [m.id for m in messages])
    return [m for m in messages if m.role != "system" and m.text.strip() and m.id not in held]


def _remove_gone(source: Memory, target: Memory, ids: list[str]) -> int:
    """Of messages the target holds in a thread where the source has them no more: delete
    those the source has nowhere (one it moved is moved by its own thread's copy)."""
    gone: list[str] = []
    for start in range(0, len(ids), PAGE):
        page = ids[start : start + PAGE]
        alive = {m.id for m in source.storage.get_messages(page)}
        gone += [i for i in page if i not in alive]
    if gone:
        target.delete_messages(gone)
    return len(gone)


def _remove_threads(source: Memory, target: Memory, resource_id: str) -> int:
    """Delete the target's threads of this resource that the source does not have."""
    gone = []
    page = 0
    while listed := target.storage.list_threads(resource_id, page=page, per_page=PAGE).items:
        gone += [t.id for t in listed if source.storage.get_thread(t.id) is None]
        page += 1
    for thread_id in gone:
        target.delete_thread(thread_id)
    return len(gone)


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
        asked = [chunk_id(i, k, n) for i, n in wanted.items() for k in range(n)]
        found: dict[str, list[float]] = {}
        owner: dict[str, str] = {}
        for stored in self.semantic.vector.get(self.name, asked) if asked else []:
            found[stored.id] = stored.vector
            owner[stored.id] = str(stored.metadata["message_id"])
        counts = Counter(owner.values())
        complete = {i for i, n in wanted.items() if counts[i] == n}
        return {c: v for c, v in found.items() if owner[c] in complete}, complete


def verify(source: Memory, target: Memory, result: Migration) -> None:
    """Every message and thread of the source is in the target with the same content,
    the target's threads hold no other message, each message the target should have
    vectors of has them in its index, and a search of the first message of a few
    threads finds the same messages on both sides (when both have vectors of the
    model). Each difference is listed, with a few ids."""
    changed: list[str] = []
    absent: list[str] = []
    threads: list[str] = []
    extra: list[str] = []
    unembedded: list[str] = []
    name = target.semantic.index_name() if target.semantic is not None else None
    store = target.vector
    indexed = name is not None and store is not None and name in store.list_indexes()
    for thread in threads_of(source.storage):
        there = target.storage.get_thread(thread.id)
        if there is None or thread_digest(there) != thread_digest(thread):
            threads.append(thread.id)
        count = 0
        for batch in messages_of(source.storage, thread.id):
            count += len(batch)
            result.checked += len(batch)
            copies = {m.id: m for m in target.storage.get_messages([m.id for m in batch])}
            for m in batch:
                if m.id not in copies:
                    absent.append(m.id)
                elif message_digest(copies[m.id]) != message_digest(m):
                    changed.append(m.id)
            if indexed:
                assert name is not None and store is not None
                held = held_messages(store, name, list(copies))
                unembedded += [
                    m.id
                    for m in copies.values()
                    if m.role != "system" and m.text.strip() and m.id not in held
                ]
        if there is not None and target.storage.list_messages(thread.id, per_page=0).total > count:
            extra.append(thread.id)
    for what, ids in (
        ("threads differ in the target (missing, or another owner, title or metadata)", threads),
        ("messages are missing in the target", absent),
        ("messages differ in the target (text, role, thread, owner, metadata or time)", changed),
        ("threads hold messages in the target that the source's do not", extra),
        (f"messages have no vectors in the target's index {name}", unembedded),
    ):
        if ids:
            result.problems.append(f"{len(ids)} {what}, e.g. {', '.join(map(repr, ids[:3]))}")
    _sample_searches(source, target, result)


def _sample_searches(source: Memory, target: Memory, result: Migration) -> None:
    sizes = sizes_of(source.storage)
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
