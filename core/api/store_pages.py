"""Every resource, thread and message of a store, a page at a time: what migration,
export and the doctor walk, in a memory bounded by the page whatever the store's size."""

from __future__ import annotations

from collections.abc import Iterator

from recallstack.core.contracts.storage import Storage
from recallstack.core.messages import Message
from recallstack.core.records import Resource, Thread

PAGE = 500
"""Threads read, and messages read and saved, per call."""


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
