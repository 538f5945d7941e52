"""The index ledger, part of the storage contract: which messages are embedded under which
index, so that a crash between a message's save and its vectors leaves it for `reindex()`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime

from recallstack.core.errors import InvalidInputError
from recallstack.core.inputs import check_id, check_ids, is_positive_int
from recallstack.core.messages import Message


class IndexLedger(ABC):
    """The ledger's methods of `Storage`: public ones check their arguments, then call
    the adapter's `_`-methods."""

    def mark_indexed(self, message_ids: Sequence[str], index_name: str) -> None:
        """Record that these messages' vectors are in `index_name`.

        Saving a message again clears its records (its text may have changed);
        deleting it removes them.
        """
        if message_ids:
            self._mark_indexed(list(dict.fromkeys(message_ids)), index_name)

    def forget_indexed(
        self, message_ids: Sequence[str] = (), *, thread_id: str | None = None
    ) -> None:
        """Clear every record of these messages (or of all of a thread's messages).

        Memory calls it before it changes or deletes their vectors, so that a
        crash in between leaves them for `Memory.reindex()` rather than recorded
        as indexed with vectors that may be missing.
        """
        if thread_id is not None:
            check_id(thread_id, "thread_id")
        if message_ids or thread_id is not None:
            self._forget_indexed(list(dict.fromkeys(check_ids(message_ids, "ids"))), thread_id)

    def unindexed(
        self, index_name: str, limit: int = 256, after: Message | None = None
    ) -> list[Message]:
        """Up to `limit` messages with no record under `index_name`, oldest first;
        with `after`, only those ordered after that message (a cursor, so that a
        message that cannot be indexed does not come back first every time)."""
        if not is_positive_int(limit):
            raise InvalidInputError(f"limit must be a positive int, got {limit!r}")
        cursor = None if after is None else (after.created_at, after.id)
        return self._unindexed(index_name, limit, cursor)

    def recorded(self, message_ids: Sequence[str], index_name: str) -> set[str]:
        """Of these messages, those with a record under `index_name` (the inspector's
        index states read a page of them)."""
        ids = list(dict.fromkeys(check_ids(message_ids, "ids")))
        return self._records_of(ids, index_name) if ids else set()

    def count_unindexed(self, index_name: str) -> int:
        """How many messages have no record under `index_name` (for progress)."""
        return self._count_unindexed(index_name)

    def index_names(self) -> list[str]:
        """Every index name some message was recorded under."""
        return sorted(self._index_names())

    # ---- what an adapter implements ---------------------------------------------

    @abstractmethod
    def _mark_indexed(self, message_ids: list[str], index_name: str) -> None: ...

    @abstractmethod
    def _forget_indexed(self, message_ids: list[str], thread_id: str | None) -> None:
        """Delete the ledger records of `message_ids` and of `thread_id`'s messages."""

    @abstractmethod
    def _unindexed(
        self, index_name: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[Message]:
        """Unrecorded messages ordered by (created_at, id), only past `after` if given."""

    @abstractmethod
    def _records_of(self, message_ids: list[str], index_name: str) -> set[str]:
        """What `recorded` answers (`Storage` has a default that any storage can use)."""

    @abstractmethod
    def _count_unindexed(self, index_name: str) -> int: ...

    @abstractmethod
    def _index_names(self) -> list[str]: ...
