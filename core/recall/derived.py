"""What a message's vectors are derived from, so that an edit or a delete reaches them all.

A message has vectors in a plain index (one per chunk of its text) and, where a
memory embeds context, in a contextual index named `<plain>_context<n>`: its
text after the `n` messages before it. A contextual vector so depends on other
messages (its *followers'* vectors depend on it), and carries a digest of the
text it was made from, so that a stale one can be told from a current one
(`recallstack doctor`). These functions are used by every Memory, whichever
indexes it writes itself, and by the doctor.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from recallstack.core.batching import batched
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import IndexNotFoundError
from recallstack.core.filters import Condition, Node
from recallstack.core.messages import Message
from recallstack.core.records import Include
from recallstack.core.vectors import Partition

_CONTEXT = re.compile(r"_context(\d+)$")


def context_size(index_name: str) -> int | None:
    """How many earlier messages a contextual index's vectors hold (None: a plain index)."""
    found = _CONTEXT.search(index_name)
    return int(found.group(1)) if found else None


def context_text(earlier: Iterable[Message], message: Message) -> str:
    """The text a contextual vector embeds: the earlier messages' text, then its own."""
    return "\n".join([*(e.text for e in earlier), message.text])


def digest(text: str) -> str:
    """A short, stable fingerprint of the text a vector was made from."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def contexts(
    storage: Storage, messages: Sequence[Message], size: int, resource_id: str | None = None
) -> dict[str, list[Message]]:
    """Each message's context: the up to `size` messages before it in its thread, system
    messages left out (they are never embedded)."""
    if not messages:
        return {}
    windows = [Include(id=m.id, before=size, after=0) for m in messages]
    around = storage.message_windows(windows, resource_id=resource_id)
    threads: dict[str, list[Message]] = {}
    for m in around:  # sorted; a window's messages stand right before its own
        threads.setdefault(m.thread_id, []).append(m)
    position = {m.id: i for ordered in threads.values() for i, m in enumerate(ordered)}
    found: dict[str, list[Message]] = {}
    for m in messages:
        if m.id in position:
            i = position[m.id]
            window = threads[m.thread_id][max(0, i - size) : i]
            found[m.id] = [e for e in window if e.role != "system"]
        else:
            found[m.id] = []
    return found


def followers(
    storage: Storage, ids: Sequence[str], size: int, resource_id: str | None = None
) -> list[Message]:
    """The messages whose contextual vectors (of `size`) hold one of these: up to `size`
    after each in its thread, these aside."""
    if not size or not ids:
        return []
    windows = [Include(id=i, before=0, after=size) for i in ids]
    around = storage.message_windows(windows, resource_id=resource_id)
    named = set(ids)
    return [m for m in around if m.id not in named]


def delete_vectors(
    storage: Storage,
    vector: VectorStore,
    names: Sequence[str],
    message_ids: Sequence[str] = (),
    *,
    thread_id: str | None = None,
) -> None:
    """Delete these stored messages' (or this thread's) vectors, every chunk, in the
    indexes `names` (one that no longer exists is passed over), each in its partition,
    read from storage."""
    reach: list[tuple[Partition, Node | None]] = []  # no filter: the whole partition
    if thread_id is not None:
        thread = storage.get_thread(thread_id)
        if thread is not None:
            reach.append((Partition(thread.resource_id, thread_id), None))
    for ids in batched(message_ids, vector.capabilities.max_filter_values):
        stored = storage.get_messages(list(ids))
        owners: dict[str, list[str]] = {}
        for m in stored:
            if m.resource_id is not None:  # always, for a stored message
                owners.setdefault(m.resource_id, []).append(m.id)
        reach += [
            (Partition(owner), Condition(("message_id",), "$in", tuple(held)))
            for owner, held in owners.items()
        ]
    for name in names:
        try:
            for partition, which in reach:
                vector.delete(name, filter=which, partition=partition)
            vector.wait_until_consistent(name)
        except IndexNotFoundError:
            continue  # recorded in the ledger, since deleted: nothing to delete there


def recorded_indexes(storage: Storage, vector: VectorStore) -> list[str]:
    """The indexes that hold vectors of this storage's messages: those its ledger
    names that the vector store has."""
    recorded = storage.index_names()
    existing = vector.list_indexes()
    return sorted(set(recorded) & set(existing))
