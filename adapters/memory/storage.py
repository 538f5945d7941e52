"""The reference storage: plain dicts, sorted on read. Thread-safe."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime
from typing import TypeVar

from recallstack.core.contracts.storage import Order, Storage, ThreadOrderBy
from recallstack.core.keywords import bm25, words
from recallstack.core.messages import Message
from recallstack.core.records import Include, Resource, Thread

T = TypeVar("T")


def _slice(items: list[T], limit: int | None, offset: int) -> list[T]:
    return items[offset:] if limit is None else items[offset : offset + limit]


class InMemoryStorage(Storage):
    backend = "memory"
    keyword_search = True

    def __init__(self) -> None:
        self._resources: dict[str, Resource] = {}
        self._threads: dict[str, Thread] = {}
        self._messages: dict[str, Message] = {}
        self._words: dict[str, Counter[str]] = {}  # message id -> its words (not system's)
        self._indexed: dict[str, set[str]] = {}  # message id -> index names
        self._recorded: Counter[str] = Counter()  # index name -> messages recorded there
        self._lock = threading.RLock()

    def _get_resource(self, resource_id: str) -> Resource | None:
        return self._resources.get(resource_id)

    def _save_resource(self, resource: Resource) -> Resource:
        self._resources[resource.id] = resource
        return resource

    def _all_resources(self, after: str | None, limit: int) -> list[Resource]:
        with self._lock:
            ids = sorted(i for i in self._resources if after is None or i > after)[:limit]
            return [self._resources[i] for i in ids]

    def _save_thread(self, thread: Thread) -> Thread:
        self._threads[thread.id] = thread
        return thread

    def _get_thread(self, thread_id: str) -> Thread | None:
        return self._threads.get(thread_id)

    def _delete_thread(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)
            for m in [m for m in self._messages.values() if m.thread_id == thread_id]:
                del self._messages[m.id]
                self._unrecord(m.id)
                self._words.pop(m.id, None)

    def _list_threads(
        self,
        resource_id: str,
        order_by: ThreadOrderBy,
        order: Order,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Thread], int]:
        with self._lock:
            threads = [t for t in self._threads.values() if t.resource_id == resource_id]
        threads.sort(key=lambda t: (getattr(t, order_by), t.id), reverse=order == "desc")
        return _slice(threads, limit, offset), len(threads)

    def _all_threads(self, after: str | None, limit: int) -> list[Thread]:
        with self._lock:
            ids = sorted(i for i in self._threads if after is None or i > after)[:limit]
            return [self._threads[i] for i in ids]

    def _save_messages(self, messages: list[Message]) -> None:
        with self._lock:
            for m in messages:
                self._messages[m.id] = m
                self._unrecord(m.id)
                self._words.pop(m.id, None)
                if m.role != "system" and (found := words(m.text)):
                    self._words[m.id] = Counter(found)

    def _get_messages(self, ids: list[str]) -> list[Message]:
        return [self._messages[i] for i in ids if i in self._messages]

    def _thread_messages(self, thread_id: str) -> list[Message]:
        found = [m for m in self._messages.values() if m.thread_id == thread_id]
        return sorted(found, key=lambda m: m.sort_key)

    def _list_messages(
        self,
        thread_id: str,
        resource_id: str | None,
        order: Order,
        start: datetime | None,
        end: datetime | None,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Message], int]:
        with self._lock:
            in_thread = [
                m
                for m in self._thread_messages(thread_id)
                if (resource_id is None or m.resource_id == resource_id)
                and (start is None or m.created_at >= start)
                and (end is None or m.created_at <= end)
            ]
        if order == "desc":
            in_thread.reverse()
        return _slice(in_thread, limit, offset), len(in_thread)

    def _include_windows(self, include: list[Include], resource_id: str | None) -> list[Message]:
        found: list[Message] = []
        threads: dict[str, tuple[list[Message], dict[str, int]]] = {}  # each read once
        with self._lock:
            for inc in include:
                target = self._messages.get(inc.id)
                if target is None or resource_id not in (None, target.resource_id):
                    continue
                if target.thread_id not in threads:
                    ordered = self._thread_messages(target.thread_id)
                    threads[target.thread_id] = (ordered, {m.id: n for n, m in enumerate(ordered)})
                neighbours, position = threads[target.thread_id]
                at = position[target.id]
                window = neighbours[max(0, at - inc.before) : at + inc.after + 1]
                found += [m for m in window if resource_id in (None, m.resource_id)]
        return found

    def _delete_messages(self, ids: list[str]) -> None:
        with self._lock:
            for i in ids:
                self._messages.pop(i, None)
                self._unrecord(i)
                self._words.pop(i, None)

    def _search_words(
        self, terms: list[str], resource_id: str, thread_id: str | None, limit: int
    ) -> list[tuple[str, float]]:
        with self._lock:
            documents = {
                i: counts
                for i, counts in self._words.items()
                if self._messages[i].resource_id == resource_id
            }
            in_thread = {i for i in documents if self._messages[i].thread_id == thread_id}
        scores = bm25(terms, documents)
        hits = [(i, s) for i, s in scores.items() if thread_id is None or i in in_thread]
        return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:limit]

    def _held_words(self, ids: list[str]) -> dict[str, Counter[str]]:
        with self._lock:
            return {i: Counter(self._words[i]) for i in ids if i in self._words}

    def _rewrite_words(self, messages: list[Message]) -> None:
        with self._lock:
            for m in messages:
                self._words.pop(m.id, None)
                if m.role != "system" and (found := words(m.text)):
                    self._words[m.id] = Counter(found)

    def _unrecord(self, message_id: str) -> None:
        """Drop a message's ledger records (the lock held)."""
        self._recorded.subtract(self._indexed.pop(message_id, ()))

    def _mark_indexed(self, message_ids: list[str], index_name: str) -> None:
        with self._lock:
            for i in message_ids:
                names = self._indexed.setdefault(i, set())
                if index_name not in names:
                    names.add(index_name)
                    self._recorded[index_name] += 1

    def _forget_indexed(self, message_ids: list[str], thread_id: str | None) -> None:
        with self._lock:
            for i in message_ids:
                self._unrecord(i)
            if thread_id is not None:
                for m in self._thread_messages(thread_id):
                    self._unrecord(m.id)

    def _unindexed(
        self, index_name: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[Message]:
        with self._lock:
            missing = [
                m
                for m in self._messages.values()
                if index_name not in self._indexed.get(m.id, ())
                and (after is None or m.sort_key > after)
            ]
        return sorted(missing, key=lambda m: m.sort_key)[:limit]

    def _records_of(self, message_ids: list[str], index_name: str) -> set[str]:
        with self._lock:
            return {i for i in message_ids if index_name in self._indexed.get(i, ())}

    def _count_unindexed(self, index_name: str) -> int:
        with self._lock:
            return sum(index_name not in self._indexed.get(i, ()) for i in self._messages)

    def _index_names(self) -> list[str]:
        with self._lock:
            return [name for name, count in self._recorded.items() if count > 0]
