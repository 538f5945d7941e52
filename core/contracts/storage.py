"""The storage contract (docs/spec/backends.md §4): threads, messages, resources.

Storage is the source of truth. Public methods check arguments and the
thread/resource invariants, then call the adapter's `_`-methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeVar

from recallstack.core.contracts.ledger import IndexLedger
from recallstack.core.errors import (
    InvalidInputError,
    NotFoundError,
    UnsupportedFeatureError,
)
from recallstack.core.inputs import check_id, check_ids, check_text, is_positive_int
from recallstack.core.keywords import query_terms, words
from recallstack.core.messages import Message, as_utc, utc_now
from recallstack.core.records import Include, MessagePage, Page, Resource, Thread, ThreadPage

MAX_WORD_HITS = 10_000
Order = Literal["asc", "desc"]
ThreadOrderBy = Literal["created_at", "updated_at"]
P = TypeVar("P", bound=Page[Any])


@dataclass(frozen=True)
class Upserted:
    """Saved messages (with their resource set), the ids that existed before, and the
    messages' threads: what the save read, handed on so that indexing reads nothing."""

    messages: list[Message]
    existing: frozenset[str]
    threads: dict[str, Thread]


class Storage(IndexLedger, ABC):
    """A store of threads, messages and resources, and their index ledger. Subclasses set
    `backend`."""

    backend: ClassVar[str]
    keyword_search: ClassVar[bool] = False
    """Whether `search_words` works here (hybrid recall needs it)."""
    asyncio_driver: bool = False
    """Whether this store awaits its driver's asyncio API when `AsyncMemory` calls it
    (core/runtime/awaiting.py); otherwise AsyncMemory calls it in a worker thread. A store may
    set it per instance (per mode)."""

    # ---- resources ------------------------------------------------------------

    def get_resource(self, resource_id: str) -> Resource | None:
        return self._get_resource(check_id(resource_id, "resource_id"))

    def save_resource(self, resource: Resource) -> Resource:
        """Insert or replace a resource."""
        if not isinstance(resource, Resource):
            raise InvalidInputError("save_resource takes a Resource")
        return self._save_resource(resource)

    # ---- threads --------------------------------------------------------------

    def save_thread(self, thread: Thread) -> Thread:
        """Insert or replace a thread. A thread never changes owner: saving one with the
        id of another resource's thread is refused."""
        if not isinstance(thread, Thread):
            raise InvalidInputError("save_thread takes a Thread")
        existing = self._get_thread(thread.id)
        if existing is not None and existing.resource_id != thread.resource_id:
            raise InvalidInputError(
                f"thread {thread.id!r} belongs to another resource; a thread never changes owner"
            )
        return self._save_thread(thread)

    def get_thread(self, thread_id: str) -> Thread | None:
        return self._get_thread(check_id(thread_id, "thread_id"))

    def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Thread:
        """Change a thread's title and/or metadata (metadata is replaced whole)."""
        thread = self.get_thread(thread_id)
        if thread is None:
            raise NotFoundError(f"thread {thread_id!r} does not exist")
        changes: dict[str, Any] = {"updated_at": utc_now()}
        if title is not None:
            changes["title"] = title
        if metadata is not None:
            changes["metadata"] = metadata
        return self._save_thread(thread.model_copy(update=changes))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread and its messages (vectors are the caller's: see Memory)."""
        self._delete_thread(check_id(thread_id, "thread_id"))

    def list_threads(
        self,
        resource_id: str,
        *,
        page: int = 0,
        per_page: int | None = None,
        order_by: ThreadOrderBy = "created_at",
        order: Order = "desc",
    ) -> ThreadPage:
        """A resource's threads, ordered by `order_by` then id."""
        check_id(resource_id, "resource_id")
        _check_paging(page, per_page)
        if order_by not in ("created_at", "updated_at") or order not in ("asc", "desc"):
            raise InvalidInputError(f"cannot order threads by {order_by!r} {order!r}")
        limit, offset = _window(page, per_page)
        items, total = self._list_threads(resource_id, order_by, order, limit, offset)
        return _page(ThreadPage, items, total, page, per_page)

    def all_threads(self, *, after: str | None = None, limit: int = 1000) -> list[Thread]:
        """Every resource's threads, by id (code-point order), the first `limit` past
        `after`: export and migration walk a whole store with it. It crosses the
        resource boundary on purpose, so it is for whoever runs the store, and no
        `Memory` method calls it."""
        if after is not None:
            check_id(after, "after")
        if not is_positive_int(limit):
            raise InvalidInputError(f"limit must be a positive integer, not {limit!r}")
        return self._all_threads(after, limit)

    def all_resources(self, *, after: str | None = None, limit: int = 1000) -> list[Resource]:
        """Every resource record, by id (code-point order), the first `limit` past
        `after`, those that own no thread included: for export and migration, like
        `all_threads`."""
        if after is not None:
            check_id(after, "after")
        if not is_positive_int(limit):
            raise InvalidInputError(f"limit must be a positive integer, not {limit!r}")
        return self._all_resources(after, limit)

    # ---- messages -------------------------------------------------------------

    def save_messages(self, messages: Sequence[Message]) -> list[Message]:
        """Upsert messages by id, in one transaction. Their threads must exist.

        A message's `resource_id` is taken from its thread; a message may move
        to another thread of its resource by saving it again. Message ids are
        global, and a message of another resource is never overwritten or
        moved: a batch that names one is refused, and nothing is written.
        """
        return self.upsert_messages(messages).messages

    def upsert_messages(self, messages: Sequence[Message]) -> Upserted:
        """`save_messages`, also saying which of the ids were stored before (read once,
        for the ownership check): Memory replaces vectors of those only."""
        if not messages:
            return Upserted([], frozenset(), {})
        if any(not isinstance(m, Message) for m in messages):
            raise InvalidInputError("save_messages takes a list of Message objects")
        ids = [m.id for m in messages]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("save_messages: the batch repeats a message id")
        threads: dict[str, Thread] = {}
        for thread_id in dict.fromkeys(m.thread_id for m in messages):
            thread = self._get_thread(thread_id)
            if thread is None:
                raise NotFoundError(f"save_messages: thread {thread_id!r} does not exist")
            threads[thread_id] = thread
        checked = []
        for m in messages:
            owner = threads[m.thread_id].resource_id
            if m.resource_id not in (None, owner):
                raise InvalidInputError(
                    f"message {m.id!r}: resource {m.resource_id!r} differs from its thread's "
                    f"resource {owner!r}"
                )
            checked.append(m if m.resource_id else m.model_copy(update={"resource_id": owner}))
        owner_of = {m.id: m.resource_id for m in checked}
        stored = self._get_messages(ids)
        taken = [m.id for m in stored if m.resource_id != owner_of[m.id]]
        if taken:
            raise InvalidInputError(
                f"save_messages: message ids {taken[:5]} belong to another resource; "
                "a write never changes another resource's message"
            )
        self._save_messages(checked)
        return Upserted(checked, frozenset(m.id for m in stored), threads)

    def get_messages(self, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids that exist, ordered by (created_at, id)."""
        wanted = list(dict.fromkeys(check_ids(ids, "ids")))
        return sorted(self._get_messages(wanted), key=lambda m: m.sort_key)

    def list_messages(
        self,
        thread_id: str,
        *,
        resource_id: str | None = None,
        page: int = 0,
        per_page: int | None = None,
        order: Order = "asc",
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> MessagePage:
        """One page of a thread's messages, sorted by (created_at, id) in `order`.

        Page 0 holds the oldest messages with `order="asc"` and the newest with
        `"desc"`; `per_page=None` is every message and `per_page=0` none (the
        total only). `start`/`end` bound `created_at` inclusively. With
        `resource_id`, a thread of another resource lists nothing.
        """
        check_id(thread_id, "thread_id")
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        _check_paging(page, per_page)
        if order not in ("asc", "desc"):
            raise InvalidInputError(f"order must be 'asc' or 'desc', got {order!r}")
        start = None if start is None else as_utc(start)
        end = None if end is None else as_utc(end)
        limit, offset = _window(page, per_page)
        items, total = self._list_messages(thread_id, resource_id, order, start, end, limit, offset)
        return _page(MessagePage, items, total, page, per_page)

    def message_windows(
        self, windows: Sequence[Include], *, resource_id: str | None = None
    ) -> list[Message]:
        """Each named message and its neighbours in its own thread, in one round trip.

        `Include(id, before, after)` asks for the message and up to `before`
        earlier and `after` later messages of its thread (recall's context).
        With `resource_id`, only messages of that resource; unknown ids are
        ignored. De-duplicated, sorted by (created_at, id).
        """
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        if isinstance(windows, (str, bytes)) or any(not isinstance(w, Include) for w in windows):
            raise InvalidInputError("message_windows takes a list of Include objects")
        if not windows:
            return []
        found = {m.id: m for m in self._include_windows(list(windows), resource_id)}
        return sorted(found.values(), key=lambda m: m.sort_key)

    def search_words(
        self, query: str, *, resource_id: str, thread_id: str | None = None, limit: int = 100
    ) -> list[tuple[str, float]]:
        """The ids of the resource's messages (or one thread's) that hold the query's
        words, best first, with their BM25 scores (`core/keywords.py`): the keyword
        signal of hybrid recall. System messages are not searched."""
        check_id(resource_id, "resource_id")
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        if not is_positive_int(limit) or limit > MAX_WORD_HITS:
            raise InvalidInputError(f"limit must be an int from 1 to {MAX_WORD_HITS:,}")
        check_text(query, "query")
        if not self.keyword_search:
            raise UnsupportedFeatureError(
                f"{self.backend} storage has no keyword search (hybrid recall); "
                "the memory, libsql, pg and mongo storages have it"
            )
        terms = query_terms(query)
        if not terms:
            return []
        return self._search_words(terms, resource_id, thread_id, limit)

    def _search_words(
        self, terms: list[str], resource_id: str, thread_id: str | None, limit: int
    ) -> list[tuple[str, float]]:
        """Where `keyword_search` is declared: BM25 over every stored message, ranked
        by (-score, id), of the resource (and thread)."""
        raise NotImplementedError

    def word_drift(self, messages: Sequence[Message]) -> list[str]:
        """The ids of these stored messages whose keyword-index entry is not the words of
        their text (`keywords.words`; none for a system message): what `doctor` reports.
        Empty where there is no keyword search."""
        if not self.keyword_search or not messages:
            return []
        held = self._held_words([m.id for m in messages])
        return [m.id for m in messages if held.get(m.id, Counter()) != _expected_words(m)]

    def repair_words(self, messages: Sequence[Message]) -> None:
        """Write these stored messages' keyword-index entries afresh from their text."""
        if self.keyword_search and messages:
            self._rewrite_words(list(messages))

    def _held_words(self, ids: list[str]) -> dict[str, Counter[str]]:
        """Where `keyword_search` is declared: each message's word counts as the keyword
        index holds them (a message it holds nothing of may be left out)."""
        raise NotImplementedError

    def _rewrite_words(self, messages: list[Message]) -> None:
        """Where `keyword_search` is declared: replace these messages' keyword entries,
        and their resources' counts, with those of their text, in one transaction."""
        raise NotImplementedError

    def delete_messages(self, ids: Sequence[str]) -> None:
        """Delete messages by id; unknown ids are ignored."""
        if ids:
            self._delete_messages(check_ids(ids, "ids"))

    def _records_of(self, message_ids: list[str], index_name: str) -> set[str]:
        """`IndexLedger.recorded`: this default reads the stored messages among these and
        walks the unrecorded ones from the first of them to the last (reindex asks this
        of each batch's followers); the built-in storages read only these records."""
        found = self._get_messages(message_ids)
        if not found:
            return set()
        stored = {m.id for m in found}
        first, last = min(m.sort_key for m in found), max(m.sort_key for m in found)
        unrecorded: set[str] = set()
        after = (first[0], "")  # just before the first: ids are never empty
        while batch := self._unindexed(index_name, 1000, after):
            unrecorded |= {m.id for m in batch} & stored
            after = batch[-1].sort_key
            if after >= last:
                break
        return stored - unrecorded

    def close(self) -> None:
        """Release connections; the default has nothing to release."""

    # ---- what an adapter implements ---------------------------------------------

    @abstractmethod
    def _get_resource(self, resource_id: str) -> Resource | None: ...

    @abstractmethod
    def _save_resource(self, resource: Resource) -> Resource: ...

    @abstractmethod
    def _save_thread(self, thread: Thread) -> Thread: ...

    @abstractmethod
    def _get_thread(self, thread_id: str) -> Thread | None: ...

    @abstractmethod
    def _delete_thread(self, thread_id: str) -> None: ...

    @abstractmethod
    def _all_threads(self, after: str | None, limit: int) -> list[Thread]: ...

    @abstractmethod
    def _all_resources(self, after: str | None, limit: int) -> list[Resource]: ...

    @abstractmethod
    def _list_threads(
        self,
        resource_id: str,
        order_by: ThreadOrderBy,
        order: Order,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Thread], int]:
        """(up to `limit` threads from `offset`, `None` meaning all; the total count)."""

    @abstractmethod
    def _save_messages(self, messages: list[Message]) -> None: ...

    @abstractmethod
    def _get_messages(self, ids: list[str]) -> list[Message]: ...

    @abstractmethod
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
        """(up to `limit` messages from `offset` in `order`, `None` meaning all; the total)."""

    @abstractmethod
    def _include_windows(self, include: list[Include], resource_id: str | None) -> list[Message]:
        """Each included message and its neighbours in its own thread, in one round trip."""

    @abstractmethod
    def _delete_messages(self, ids: list[str]) -> None: ...


def _expected_words(message: Message) -> Counter[str]:
    return Counter(words(message.text)) if message.role != "system" else Counter()


def _window(page: int, per_page: int | None) -> tuple[int | None, int]:
    """(limit, offset) of a page; `per_page=None` is everything on page 0, nothing after."""
    if per_page is None:
        return (None, 0) if page == 0 else (0, 0)
    return per_page, page * per_page


def _page(kind: type[P], items: list[Any], total: int, page: int, per_page: int | None) -> P:
    """One page of a listing. It has more when items lie beyond it (an empty
    `per_page=0` page has more when any exist)."""
    has_more = per_page is not None and (page + 1) * per_page < total
    return kind(items=items, total=total, page=page, per_page=per_page, has_more=has_more)


def _check_paging(page: int, per_page: int | None) -> None:
    if isinstance(page, bool) or not isinstance(page, int) or page < 0:
        raise InvalidInputError(f"page must be an int >= 0, got {page!r}")
    if per_page is not None and (
        isinstance(per_page, bool) or not isinstance(per_page, int) or per_page < 0
    ):
        raise InvalidInputError(f"per_page must be an int >= 0 or None, got {per_page!r}")
