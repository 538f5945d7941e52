"""MongoDB storage: resources, threads and messages, one collection each.

Timestamps are stored as integer microseconds since the epoch (BSON dates keep
only milliseconds, and messages are ordered by `(created_at, id)` exactly).
Content and metadata are stored as JSON text: their keys are the caller's and
may hold anything. The index ledger is each message's `indexed` list, so saving
a message again clears it in the same single-document write.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from recallstack.adapters.mongo.connection import Connection
from recallstack.adapters.mongo.documents import field_name, key_name
from recallstack.core.batching import batched
from recallstack.core.contracts.storage import Order, Storage, ThreadOrderBy
from recallstack.core.keywords import score, words
from recallstack.core.messages import Message
from recallstack.core.records import Include, Resource, Thread

RESOURCES = "recallstack_resources"
THREADS = "recallstack_threads"
MESSAGES = "recallstack_messages"
WORD_STATS = "recallstack_word_stats"
"""Per resource: how many messages keyword search holds, and their words in all."""
CHUNK = 1_000
"""Documents per write and ids per `$in`: no statement grows with the input."""
CURSOR_WINDOWS = 4
"""Up to this many windows in one thread are read with two index-served cursor
queries each; more are cut from one read of the thread's (created, id) keys."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _v1(db: Any) -> None:
    db[THREADS].create_index([("resource_id", 1), ("created", 1), ("_id", 1)])
    db[THREADS].create_index([("resource_id", 1), ("updated", 1), ("_id", 1)])
    db[MESSAGES].create_index([("thread_id", 1), ("created", 1), ("_id", 1)])
    db[MESSAGES].create_index([("resource_id", 1)])
    db[MESSAGES].create_index([("created", 1), ("_id", 1)])
    db[MESSAGES].create_index([("indexed", 1)])
    db[MESSAGES].create_index([("resource_id", 1), ("words.$**", 1)])


MIGRATIONS = [_v1]


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def _datetime(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def _thread_document(thread: Thread) -> dict[str, Any]:
    return {
        "_id": thread.id,
        "resource_id": thread.resource_id,
        "title": thread.title,
        "metadata": json.dumps(thread.metadata),
        "created": _micros(thread.created_at),
        "updated": _micros(thread.updated_at),
    }


def _resource(document: dict[str, Any]) -> Resource:
    return Resource(
        id=document["_id"],
        metadata=json.loads(document["metadata"]),
        created_at=_datetime(document["created"]),
        updated_at=_datetime(document["updated"]),
    )


def _thread(document: dict[str, Any]) -> Thread:
    return Thread(
        id=document["_id"],
        resource_id=document["resource_id"],
        title=document["title"],
        metadata=json.loads(document["metadata"]),
        created_at=_datetime(document["created"]),
        updated_at=_datetime(document["updated"]),
    )


def _message_document(message: Message) -> dict[str, Any]:
    """A message as stored, with its word counts for keyword search, which covers
    what semantic recall embeds: text, not system messages."""
    counts = Counter(words(message.text)) if message.role != "system" else Counter()
    return {
        "_id": message.id,
        "thread_id": message.thread_id,
        "resource_id": message.resource_id,
        "role": message.role,
        "content": json.dumps(message.model_dump(mode="json")["content"]),
        "created": _micros(message.created_at),
        "metadata": None if message.metadata is None else json.dumps(message.metadata),
        "indexed": [],
        "words": {field_name(w): n for w, n in counts.items()},
        "length": counts.total(),
    }


def _message(document: dict[str, Any]) -> Message:
    metadata = document["metadata"]
    return Message(
        id=document["_id"],
        thread_id=document["thread_id"],
        resource_id=document["resource_id"],
        role=document["role"],
        content=json.loads(document["content"]),
        created_at=_datetime(document["created"]),
        metadata=None if metadata is None else json.loads(metadata),
    )


def _after(created: int, id_: str) -> dict[str, Any]:
    """Messages ordered after (created, id)."""
    return {"$or": [{"created": {"$gt": created}}, {"created": created, "_id": {"$gt": id_}}]}


def _before(created: int, id_: str) -> dict[str, Any]:
    return {"$or": [{"created": {"$lt": created}}, {"created": created, "_id": {"$lt": id_}}]}


ASCENDING = [("created", 1), ("_id", 1)]
DESCENDING = [("created", -1), ("_id", -1)]


class MongoStorage(Storage):
    backend = "mongo"
    keyword_search = True

    def __init__(self, url: str, *, client: Any = None, database: str | None = None) -> None:
        self.connection = Connection(url, client=client, database=database)
        self.asyncio_driver = self.connection.asyncio_driver
        self.connection.migrate("storage", MIGRATIONS)

    @property
    def resources(self) -> Any:
        return self.connection.db[RESOURCES]

    @property
    def threads(self) -> Any:
        return self.connection.db[THREADS]

    @property
    def messages(self) -> Any:
        return self.connection.db[MESSAGES]

    def close(self) -> None:
        self.connection.close()

    # ---- resources and threads ---------------------------------------------------

    def _get_resource(self, resource_id: str) -> Resource | None:
        with self.connection.wrapped():
            found = self.resources.find_one({"_id": resource_id})
        return None if found is None else _resource(found)

    def _all_resources(self, after: str | None, limit: int) -> list[Resource]:
        query = {} if after is None else {"_id": {"$gt": after}}
        with self.connection.wrapped():
            found = list(self.resources.find(query).sort("_id", 1).limit(limit))
        return [_resource(d) for d in found]

    def _save_resource(self, resource: Resource) -> Resource:
        document = {
            "metadata": json.dumps(resource.metadata),
            "created": _micros(resource.created_at),
            "updated": _micros(resource.updated_at),
        }
        with self.connection.wrapped():
            self.resources.replace_one({"_id": resource.id}, document, upsert=True)
        return resource

    def _save_thread(self, thread: Thread) -> Thread:
        document = _thread_document(thread)
        del document["_id"]
        with self.connection.wrapped():
            self.threads.replace_one({"_id": thread.id}, document, upsert=True)
        return thread

    def _get_thread(self, thread_id: str) -> Thread | None:
        with self.connection.wrapped():
            found = self.threads.find_one({"_id": thread_id})
        return None if found is None else _thread(found)

    def _delete_thread(self, thread_id: str) -> None:
        with self.connection.transaction() as session:
            self._uncount({"thread_id": thread_id}, session)
            self.messages.delete_many({"thread_id": thread_id}, session=session)
            self.threads.delete_one({"_id": thread_id}, session=session)

    def _list_threads(
        self,
        resource_id: str,
        order_by: ThreadOrderBy,
        order: Order,
        limit: int | None,
        offset: int,
    ) -> tuple[list[Thread], int]:
        field = "created" if order_by == "created_at" else "updated"
        direction = -1 if order == "desc" else 1
        query = {"resource_id": resource_id}
        with self.connection.wrapped():
            total = self.threads.count_documents(query)
            if limit == 0:
                return [], total
            cursor = self.threads.find(query).sort([(field, direction), ("_id", direction)])
            found = list(cursor.skip(offset).limit(limit or 0))
        return [_thread(d) for d in found], total

    def _all_threads(self, after: str | None, limit: int) -> list[Thread]:
        query = {} if after is None else {"_id": {"$gt": after}}
        with self.connection.wrapped():
            found = list(self.threads.find(query).sort("_id", 1).limit(limit))
        return [_thread(d) for d in found]

    # ---- messages ---------------------------------------------------------------

    def _save_messages(self, messages: list[Message]) -> None:
        documents = [_message_document(m) for m in messages]
        with self.connection.transaction() as session:
            for chunk in batched(documents, CHUNK):
                self.connection.replace(
                    self.messages,
                    chunk,
                    session,
                    lambda ids: self._uncount({"_id": {"$in": ids}}, session),
                )
                self._count([(d["resource_id"], d["length"]) for d in chunk], 1, session)

    def _get_messages(self, ids: list[str]) -> list[Message]:
        with self.connection.wrapped():
            return [
                _message(d)
                for chunk in batched(ids, CHUNK)
                for d in self.messages.find({"_id": {"$in": chunk}})
            ]

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
        query: dict[str, Any] = {"thread_id": thread_id}
        if resource_id is not None:
            query["resource_id"] = resource_id
        if start is not None or end is not None:
            query["created"] = {
                **({"$gte": _micros(start)} if start is not None else {}),
                **({"$lte": _micros(end)} if end is not None else {}),
            }
        with self.connection.wrapped():
            total = self.messages.count_documents(query)
            if limit == 0:
                return [], total
            cursor = self.messages.find(query).sort(DESCENDING if order == "desc" else ASCENDING)
            found = list(cursor.skip(offset).limit(limit or 0))
        return [_message(d) for d in found], total

    def _include_windows(self, include: list[Include], resource_id: str | None) -> list[Message]:
        with self.connection.wrapped():
            targets = {d["_id"]: d for d in self._find_ids([i.id for i in include])}
            wanted = [
                (inc, targets[inc.id])
                for inc in include
                if inc.id in targets and resource_id in (None, targets[inc.id]["resource_id"])
            ]
            by_thread: dict[str, list[tuple[Include, dict[str, Any]]]] = {}
            for inc, target in wanted:
                by_thread.setdefault(target["thread_id"], []).append((inc, target))
            found = {target["_id"]: target for _, target in wanted}
            for thread_id, windows in by_thread.items():
                if len(windows) <= CURSOR_WINDOWS:
                    neighbours = self._cursor_windows(thread_id, windows)
                else:
                    neighbours = self._cut_windows(thread_id, windows)
                found.update((d["_id"], d) for d in neighbours)
        return [_message(d) for d in found.values() if resource_id in (None, d["resource_id"])]

    def _find_ids(self, ids: list[str]) -> Iterator[dict[str, Any]]:
        for chunk in batched(ids, CHUNK):
            yield from self.messages.find({"_id": {"$in": chunk}})

    def _cursor_windows(
        self, thread_id: str, windows: list[tuple[Include, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Each window as two cursor queries on the (thread_id, created, _id) index."""
        found: list[dict[str, Any]] = []
        for inc, target in windows:
            key = (target["created"], target["_id"])
            for count, side, order in (
                (inc.before, _before, DESCENDING),
                (inc.after, _after, ASCENDING),
            ):
                if count:
                    query = {"thread_id": thread_id, **side(*key)}
                    found += self.messages.find(query).sort(order).limit(count)
        return found

    def _cut_windows(
        self, thread_id: str, windows: list[tuple[Include, dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Many windows of one thread: its keys read once (index-only), the windows cut
        from them, and only the messages in them fetched."""
        keys = self.messages.find({"thread_id": thread_id}, {"_id": 1}).sort(ASCENDING)
        order = [d["_id"] for d in keys]
        position = {id_: n for n, id_ in enumerate(order)}
        wanted: set[str] = set()
        for inc, target in windows:
            at = position.get(target["_id"])
            if at is not None:
                wanted.update(order[max(0, at - inc.before) : at + inc.after + 1])
        return list(self._find_ids(sorted(wanted)))

    def _delete_messages(self, ids: list[str]) -> None:
        with self.connection.transaction() as session:
            for chunk in batched(ids, CHUNK):
                self._uncount({"_id": {"$in": chunk}}, session)
                self.messages.delete_many({"_id": {"$in": chunk}}, session=session)

    # ---- keyword search -------------------------------------------------------------

    def _uncount(self, query: dict[str, Any], session: Any) -> None:
        """Take the messages `query` selects out of the word statistics."""
        found = self.messages.find(query, {"resource_id": 1, "length": 1}, session=session)
        self._count([(d["resource_id"], d.get("length", 0)) for d in found], -1, session)

    def _count(self, messages: list[tuple[str | None, int]], sign: int, session: Any) -> None:
        totals: dict[str, list[int]] = {}
        for resource_id, length in messages:
            if resource_id is not None and length:
                total = totals.setdefault(resource_id, [0, 0])
                total[0] += 1
                total[1] += length
        stats = self.messages.database[WORD_STATS]
        for resource_id, (documents, all_words) in totals.items():
            stats.update_one(
                {"_id": resource_id},
                {"$inc": {"documents": sign * documents, "words": sign * all_words}},
                upsert=True,
                session=session,
            )

    def _held_words(self, ids: list[str]) -> dict[str, Counter[str]]:
        with self.connection.wrapped():
            return {
                str(d["_id"]): Counter({key_name(k): int(n) for k, n in d.get("words", {}).items()})
                for chunk in batched(ids, CHUNK)
                for d in self.messages.find({"_id": {"$in": chunk}}, {"words": 1})
            }

    def _rewrite_words(self, messages: list[Message]) -> None:
        with self.connection.transaction() as session:
            for chunk in batched(messages, CHUNK):
                query = {"_id": {"$in": [m.id for m in chunk]}}
                stored = {d["_id"] for d in self.messages.find(query, {"_id": 1}, session=session)}
                self._uncount(query, session)
                documents = [_message_document(m) for m in chunk if m.id in stored]
                for d in documents:
                    words_only = {"words": d["words"], "length": d["length"]}
                    self.messages.update_one(
                        {"_id": d["_id"]}, {"$set": words_only}, session=session
                    )
                self._count([(d["resource_id"], d["length"]) for d in documents], 1, session)

    def _search_words(
        self, terms: list[str], resource_id: str, thread_id: str | None, limit: int
    ) -> list[tuple[str, float]]:
        """BM25 (`core/keywords.py`) of the resource's messages that hold a term,
        scored here from their counts and the resource's statistics."""
        keys = {t: f"words.{field_name(t)}" for t in terms}
        with self.connection.wrapped():
            stats = self.messages.database[WORD_STATS].find_one({"_id": resource_id})
            if not stats or stats["documents"] <= 0:
                return []
            query = {
                "resource_id": resource_id,
                "$or": [{key: {"$exists": True}} for key in keys.values()],
            }
            fields = {"thread_id": 1, "length": 1, "words": 1}
            found = list(self.messages.find(query, fields))
        counts = [
            (d, {t: d["words"][field_name(t)] for t in terms if field_name(t) in d["words"]})
            for d in found
        ]
        frequency = {t: sum(1 for _, c in counts if t in c) for t in terms}
        mean = stats["words"] / stats["documents"] or 1.0
        hits = [
            (d["_id"], score(c, d["length"], stats["documents"], mean, frequency))
            for d, c in counts
            if thread_id is None or d["thread_id"] == thread_id
        ]
        return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:limit]

    # ---- the index ledger ---------------------------------------------------------

    def _mark_indexed(self, message_ids: list[str], index_name: str) -> None:
        with self.connection.wrapped():
            for chunk in batched(message_ids, CHUNK):
                self.messages.update_many(
                    {"_id": {"$in": chunk}}, {"$addToSet": {"indexed": index_name}}
                )

    def _forget_indexed(self, message_ids: list[str], thread_id: str | None) -> None:
        with self.connection.wrapped():
            for chunk in batched(message_ids, CHUNK):
                self.messages.update_many({"_id": {"$in": chunk}}, {"$set": {"indexed": []}})
            if thread_id is not None:
                self.messages.update_many({"thread_id": thread_id}, {"$set": {"indexed": []}})

    def _unindexed(
        self, index_name: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[Message]:
        query: dict[str, Any] = {"indexed": {"$ne": index_name}}
        if after is not None:
            query.update(_after(_micros(after[0]), after[1]))
        with self.connection.wrapped():
            found = list(self.messages.find(query).sort(ASCENDING).limit(limit))
        return [_message(d) for d in found]

    def _records_of(self, message_ids: list[str], index_name: str) -> set[str]:
        found: set[str] = set()
        with self.connection.wrapped():
            for chunk in batched(message_ids, CHUNK):
                query = {"_id": {"$in": chunk}, "indexed": index_name}
                found |= {str(d["_id"]) for d in self.messages.find(query, {"_id": 1})}
        return found

    def _count_unindexed(self, index_name: str) -> int:
        with self.connection.wrapped():
            count: int = self.messages.count_documents({"indexed": {"$ne": index_name}})
        return count

    def _index_names(self) -> list[str]:
        with self.connection.wrapped():
            return [str(name) for name in self.messages.distinct("indexed")]
