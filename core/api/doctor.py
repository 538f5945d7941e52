"""The doctor: does every derived record agree with the messages it was made from?

A memory keeps three kinds of record beside each message: its vectors in each
index (plain and contextual), the index ledger (which indexes hold them), and
its words in the keyword index. `examine` reads them all, a page at a time, and
reports what disagrees:

- **missing**: a message the ledger records as indexed has no vector there;
- **orphans**: a vector whose message is gone;
- **stale**: a vector the ledger counts as current but made from another text
  (a contextual vector whose context changed, or metadata of another thread);
- **words**: a message whose keyword entry is not the words of its text.

`repair` fixes each: orphans are deleted; missing and stale vectors lose
their ledger records (stale ones their vectors too) and, where this memory
writes that index, are embedded again by `reindex()`; word entries are
written afresh. Messages merely not indexed yet are counted, not drift:
`reindex()` is their cure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from recallstack.core.api.memory import Memory
from recallstack.core.api.store_pages import PAGE, messages_of, threads_of
from recallstack.core.api.vector_reads import all_vectors, message_vectors
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.messages import Message
from recallstack.core.recall.derived import context_size, context_text, contexts, digest
from recallstack.core.recall.records import is_chunk_id
from recallstack.core.vectors import EVERYWHERE, StoredVector

Progress = Callable[[int, int], None]
State = Literal["indexed", "not indexed", "stale", "not embedded"]
"""A message's state in one index, as `states` reads it."""


@dataclass
class Checkup:
    """What `examine` found, by index where it concerns vectors (ids, so that a user can
    look them up)."""

    messages: int = 0
    indexes: list[str] = field(default_factory=list)
    missing: dict[str, list[str]] = field(default_factory=dict)
    """Index → messages the ledger records there that have no vector there."""
    orphans: dict[str, list[str]] = field(default_factory=dict)
    """Index → ids of vectors whose message does not exist."""
    stale: dict[str, list[str]] = field(default_factory=dict)
    """Index → messages whose vectors there were made from another text or thread."""
    words: list[str] = field(default_factory=list)
    """Messages whose keyword-index entry differs from their text."""
    unindexed: dict[str, int] = field(default_factory=dict)
    """Index → messages not indexed there yet (not drift: `reindex()` indexes them)."""
    left: list[str] = field(default_factory=list)
    """After a repair: what this memory could not fix itself, and who can."""

    @property
    def drift(self) -> int:
        """How many records disagree with their messages."""
        by_index = [self.missing, self.orphans, self.stale]
        return sum(len(ids) for found in by_index for ids in found.values()) + len(self.words)

    @property
    def ok(self) -> bool:
        return self.drift == 0

    def summary(self) -> dict[str, object]:
        """The counts, for the CLI and logs."""
        return {
            "messages": self.messages,
            "indexes": self.indexes,
            "missing_vectors": {k: len(v) for k, v in self.missing.items() if v},
            "orphan_vectors": {k: len(v) for k, v in self.orphans.items() if v},
            "stale_vectors": {k: len(v) for k, v in self.stale.items() if v},
            "word_drift": len(self.words),
            "not_indexed": {k: v for k, v in self.unindexed.items() if v},
            "drift": self.drift,
            "left": self.left,
        }


def examine(memory: Memory, progress: Progress | None = None) -> Checkup:
    """Read every message, vector and word entry of the memory; change nothing."""
    storage, store = memory.storage, memory.vector
    result = Checkup()
    names = _indexes(memory)
    result.indexes = names
    unindexed = {name: _unindexed(memory, name) for name in names}
    result.unindexed = {name: len(ids) for name, ids in unindexed.items()}
    seen = dict.fromkeys(names, 0)
    total = 0
    if progress is not None:  # a count per thread: read only for the progress it shows
        total = sum(storage.list_messages(t.id, per_page=0).total for t in threads_of(storage))
    for thread in threads_of(storage):
        for page in messages_of(storage, thread.id):
            result.messages += len(page)
            result.words += storage.word_drift(page)
            for name in names:
                assert store is not None
                held = message_vectors(store, name, [m.id for m in page])
                seen[name] += len(held)
                current = [m for m in page if m.id not in unindexed[name]]
                missing, stale = _compare(memory, name, current, held)
                result.missing.setdefault(name, []).extend(missing)
                result.stale.setdefault(name, []).extend(stale)
            if progress is not None:
                progress(result.messages, total)
    for name in names:
        assert store is not None
        if store.describe_index(name).count > seen[name]:  # some vectors have no message
            result.orphans[name] = _orphans(memory, store, name)
    return result


def states(memory: Memory, messages: Sequence[Message]) -> dict[str, dict[str, State]]:
    """Index → each message's state there, as `examine` judges it: `indexed` (its vectors
    are current), `not indexed` (none: `reindex()` writes them), `stale` (made from another
    text, context or thread), `not embedded` (a system message or one without text)."""
    store = memory.vector
    found: dict[str, dict[str, State]] = {}
    for name in _indexes(memory):
        if not messages:
            found[name] = {}
            continue
        assert store is not None
        ids = [m.id for m in messages]
        recorded = memory.storage.recorded(ids, name)
        current = [m for m in messages if m.id in recorded]
        missing, stale = _compare(memory, name, current, message_vectors(store, name, ids))
        found[name] = {
            m.id: _state(m, m.id in recorded and m.id not in missing, m.id in stale)
            for m in messages
        }
    return found


def _state(message: Message, current: bool, stale: bool) -> State:
    if stale:
        return "stale"
    if message.role == "system" or not message.text.strip():
        return "not embedded"
    return "indexed" if current else "not indexed"


def repair(memory: Memory, found: Checkup) -> Checkup:
    """Fix what `examine` found, then examine again: the result says what is left."""
    storage, store = memory.storage, memory.vector
    if found.words:
        for start in range(0, len(found.words), PAGE):
            storage.repair_words(storage.get_messages(found.words[start : start + PAGE]))
    for name, ids in found.orphans.items():
        if ids and store is not None:
            for start in range(0, len(ids), PAGE):
                store.delete(name, ids=ids[start : start + PAGE], partition=EVERYWHERE)
    again = sorted({i for ids in [*found.missing.values(), *found.stale.values()] for i in ids})
    if again:
        storage.forget_indexed(again)
    for name, ids in found.stale.items():
        if ids and store is not None:
            for start in range(0, len(ids), PAGE):
                store.delete(
                    name,
                    filter={"message_id": {"$in": ids[start : start + PAGE]}},
                    partition=EVERYWHERE,
                )
    own = memory.semantic.own_index_names() if memory.semantic is not None else set()
    if again and memory.semantic is not None:
        memory.reindex()
    after = examine(memory)
    for name, count in after.unindexed.items():
        if count and name not in own:
            after.left.append(
                f"{count} messages not indexed in {name}: a reindex() by a memory that "
                "writes that index embeds them"
            )
    return after


def _indexes(memory: Memory) -> list[str]:
    """The indexes that hold this storage's vectors (`derived.recorded_indexes`)."""
    if memory.vector is None:
        return []
    recorded = set(memory.storage.index_names())
    if memory.semantic is not None:
        recorded |= memory.semantic.own_index_names()
    return sorted(recorded & set(memory.vector.list_indexes()))


def _unindexed(memory: Memory, name: str) -> set[str]:
    found: set[str] = set()
    after = None
    while batch := memory.storage.unindexed(name, limit=PAGE, after=after):
        found.update(m.id for m in batch)
        after = batch[-1]
    return found


def _compare(
    memory: Memory, name: str, current: list[Message], held: list[StoredVector]
) -> tuple[list[str], list[str]]:
    """Of the messages the ledger records in `name`: those with no vector there, and
    those whose vectors there were made from another text or thread."""
    by_message: dict[str, list[StoredVector]] = {}
    for hit in held:
        by_message.setdefault(str(hit.metadata.get("message_id")), []).append(hit)
    size = context_size(name)
    earlier = contexts(memory.storage, current, size) if size else {}
    missing: list[str] = []
    stale: list[str] = []
    for m in current:
        hits = by_message.get(m.id, [])
        embedded = m.role != "system" and bool(m.text.strip())
        if embedded and not hits:
            missing.append(m.id)
        elif hits and (
            not embedded
            or any(h.metadata.get("thread_id") != m.thread_id for h in hits)
            or (
                size
                and any(
                    h.metadata.get("context_digest") != digest(context_text(earlier[m.id], m))
                    for h in hits
                )
            )
        ):
            stale.append(m.id)
    return missing, stale


def _orphans(memory: Memory, store: VectorStore, name: str) -> list[str]:
    """The vectors of `name` whose message is not in storage, or that sit under an id
    which is none of their message's chunk ids (one written before vector ids escaped
    `#` and `%`, say)."""
    found: list[str] = []
    for page in all_vectors(store, name):
        owners = {str(h.metadata.get("message_id")) for h in page}
        alive = {m.id for m in memory.storage.get_messages(sorted(owners))}
        for h in page:
            owner = str(h.metadata.get("message_id"))
            if owner not in alive or not is_chunk_id(h.id, owner):
                found.append(h.id)
    return found
