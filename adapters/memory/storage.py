"""The reference storage: plain dicts, sorted on read. Thread-safe."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import TypeVar

from recallstack.core.messages import Message
from recallstack.core.records import Include, MessagePage, Resource, Thread, ThreadPage
from recallstack.core.storage import Order, Storage, ThreadOrderBy

T = TypeVar("T")


def page_of(items: list[T], page: int, per_page: int | None) -> tuple[list[T], bool]:
    """Slice one page out of a full, ordered list; returns (page, has_more)."""
    if per_page is None:
        return (items if page == 0 else []), False
    return items[page * per_page : (page + 1) * per_page], (page + 1) * per_page < len(items)


class InMemoryStorage(Storage):
    backend = "memory"

    def __init__(self) -> None:
        self._resources: dict[str, Resource] = {}
        self._threads: dict[str, Thread] = {}
        self._messages: dict[str, Message] = {}
        self._indexed: dict[str, set[str]] = {}  # message id -> index names
        self._lock = threading.RLock()

    def _get_resource(self, resource_id: str) -> Resource | None:
        return self._resources.get(resource_id)

    def _save_resource(self, resource: Resource) -> Resource:
        self._resources[resource.id] = resource
        return resource

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
                self._indexed.pop(m.id, None)

    def _list_threads(
        self,
        resource_id: str,
        page: int,
        per_page: int | None,
        order_by: ThreadOrderBy,
        order: Order,
    ) -> ThreadPage:
        with self._lock:
            threads = [t for t in self._threads.values() if t.resource_id == resource_id]
        threads.sort(key=lambda t: (getattr(t, order_by), t.id), reverse=order == "desc")
        items, has_more = page_of(threads, page, per_page)
        return ThreadPage(
            items=items, total=len(threads), page=page, per_page=per_page, has_more=has_more
        )

    def _save_messages(self, messages: list[Message]) -> None:
        with self._lock:
            for m in messages:
                self._messages[m.id] = m
                self._indexed.pop(m.id, None)

    def _get_messages(self, ids: list[str]) -> list[Message]:
        return [self._messages[i] for i in ids if i in self._messages]

    def _thread_messages(self, thread_id: str) -> list[Message]:
        found = [m for m in self._messages.values() if m.thread_id == thread_id]
        return sorted(found, key=lambda m: m.sort_key)

    def _list_messages(
        self,
        thread_id: str,
        resource_id: str | None,
        page: int,
        per_page: int | None,
        order: Order,
        start: datetime | None,
        end: datetime | None,
        include: list[Include],
    ) -> MessagePage:
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
            items, has_more = page_of(in_thread, page, per_page)
            chosen = {m.id: m for m in items}
            for inc in include:
                target = self._messages.get(inc.id)
                if target is None or resource_id not in (None, target.resource_id):
                    continue
                neighbours = self._thread_messages(target.thread_id)
                at = neighbours.index(target)
                for m in neighbours[max(0, at - inc.before) : at + inc.after + 1]:
                    chosen[m.id] = m
        messages = sorted(chosen.values(), key=lambda m: m.sort_key, reverse=order == "desc")
        return MessagePage(
            items=messages, total=len(in_thread), page=page, per_page=per_page, has_more=has_more
        )

    def _delete_messages(self, ids: list[str]) -> None:
        with self._lock:
            for i in ids:
                self._messages.pop(i, None)
                self._indexed.pop(i, None)

    def _mark_indexed(self, message_ids: list[str], index_name: str) -> None:
        with self._lock:
            for i in message_ids:
                self._indexed.setdefault(i, set()).add(index_name)

    def _unindexed(self, index_name: str, limit: int) -> list[Message]:
        with self._lock:
            missing = [
                m for m in self._messages.values() if index_name not in self._indexed.get(m.id, ())
            ]
        return sorted(missing, key=lambda m: m.sort_key)[:limit]

    def _index_names(self) -> list[str]:
        with self._lock:
            return list({n for names in self._indexed.values() for n in names})
