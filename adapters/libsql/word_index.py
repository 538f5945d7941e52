"""Keyword search answered in process: each resource's BM25 postings, loaded from
the FTS5 tables and kept in step with them.

FTS5 holds the keyword index durably, but reading a common word's instances
there costs about a millisecond per thousand messages that hold it: a search
over one resource of 10,000 messages took ~10 ms. Here a resource's postings
are arrays, scored with numpy in a fraction of that.

Every search first reads the file's change stamp (`Database.changes()`); when
it moved since the copy's last refresh, one statement (one consistent
snapshot) reads the resource's counters (`documents`, `added`, `removed`) and the documents added
since the copy's `added`. When `removed` moved, the same statement lists the
resource's documents, and those gone are dropped. A document is known by its
(rowid, added) pair, so a reused rowid is never taken for the row it replaced.
A copy whose counts disagree with the counters, or that holds more dropped
documents than live ones, is read afresh. Scores follow `core/keywords.py`
exactly: a cached copy ranks as the reference does.

FTS5 holds each message's words (`keywords.words`) joined by spaces, so both
paths read the same words (storage.py, `_v7`). A resource's first search in a
process is FTS5's (`LibSQLStorage._search_words`):
a one-off call, a CLI's, pays for no copy; its second builds the copy. At
most `WORD_BUDGET` word instances are held per store, the least recently
searched resource dropped first; a resource larger than that is searched by
FTS5 alone.
"""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from collections import Counter, OrderedDict
from typing import Any

import numpy as np
import numpy.typing as npt

from recallstack.adapters.libsql.database import Database
from recallstack.core.keywords import K1, B

WORD_BUDGET = 5_000_000
"""Word instances cached per store, all resources together: postings are fewer."""

REMEMBERED = 10_000
"""Resources remembered as searched once: their next search builds their copy."""

FTS = "recallstack_messages_fts"
"""Keyword search: FTS5 over the messages' text, its rowid the message row's."""
VOCABULARY = "recallstack_messages_words"
"""FTS5's word instances (term, row): each message's count of each word."""
STATS = "recallstack_word_stats"
"""Per resource, how many messages keyword search holds and their words in all,
and how many times words were added to it and removed from it (`added`, `removed`)."""
LENGTHS = "recallstack_word_lengths"
"""Each keyword-searched message row's length in words, resource, and the resource's
`added` count that brought it: a plain table, since reading an FTS5 column costs a
lookup in its content table (half of an FTS5 search's time, measured)."""

_READ = f"""
SELECT 0, documents, words, added, removed, NULL, NULL, NULL
FROM {STATS} WHERE resource_id = ?
UNION ALL
SELECT 1, doc, added, NULL, NULL, NULL, NULL, NULL
FROM {LENGTHS} WHERE resource_id = ? AND ?
UNION ALL
SELECT 2, l.doc, l.added, l.length, NULL, m.id, m.thread_id, f.text
FROM {LENGTHS} l JOIN recallstack_messages m ON m.rowid = l.doc
JOIN {FTS} f ON f.rowid = l.doc
WHERE l.resource_id = ? AND l.added > ?
"""
"""A resource's counters, its documents' keys when `listing`, and the documents
added since `since`, in one statement: SQLite reads them from one snapshot."""


class ResourceWords:
    """One resource's documents and postings, as of its counters `added` and `removed`."""

    def __init__(self) -> None:
        self.added = -1
        self.removed = -1
        self.stamp: tuple[int, int] | None = None
        """The file's `Database.changes()` before the last refresh: unmoved, no
        refresh is needed."""
        self.keys: dict[tuple[int, int], int] = {}
        """(rowid, added) of each live document → its position."""
        self.ids: list[str] = []
        self.rank = array("i")
        """Each position's place among all held ids, by id: how ties are broken."""
        self._by_id: list[str] = []
        self.threads = array("i")
        self._thread_codes: dict[str, int] = {}
        self.lengths = array("i")
        self.alive = bytearray()
        self.documents = 0
        self.words = 0
        self.held = 0
        """Words of the documents held, dropped ones' included: what the budget counts."""
        self.postings: dict[str, tuple[array[int], array[int]]] = {}
        """Each word's (positions, counts), dropped documents' included."""

    def add(self, rows: list[tuple[tuple[int, int], str, str, str]]) -> None:
        """Add documents given as ((rowid, added), message id, thread id, text)."""
        start = len(self.ids)
        for key, message_id, thread_id, text in rows:
            self._add(key, message_id, thread_id, text)
        if len(rows) <= 32:  # a turn's messages: each placed among the ids
            for message_id in self.ids[start:]:
                place = bisect.bisect_left(self._by_id, message_id)
                self._by_id.insert(place, message_id)
                ranks = np.frombuffer(self.rank, dtype=np.intc)
                ranks[ranks >= place] += 1
                del ranks  # its buffer stops the array from growing
                self.rank.append(place)
        else:  # a load: every id ranked afresh, in Python's order of strings (SQLite's)
            order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
            self._by_id = [self.ids[p] for p in order]
            ranks = np.empty(len(order), dtype=np.intc)
            ranks[order] = np.arange(len(order), dtype=np.intc)
            self.rank = array("i", ranks.tobytes())

    def _add(self, key: tuple[int, int], message_id: str, thread_id: str, text: str) -> None:
        position = len(self.ids)
        counts = Counter(text.split(" "))  # FTS5 holds the words, space-separated
        self.keys[key] = position
        self.ids.append(message_id)
        self.threads.append(self._thread_codes.setdefault(thread_id, len(self._thread_codes)))
        length = sum(counts.values())
        self.lengths.append(length)
        self.alive.append(1)
        self.documents += 1
        self.words += length
        self.held += length
        for term, count in counts.items():
            positions, found = self.postings.setdefault(term, (array("i"), array("i")))
            positions.append(position)
            found.append(count)

    def keep_only(self, live: set[tuple[int, int]]) -> None:
        """Drop the documents whose keys are not in `live`."""
        for key in [key for key in self.keys if key not in live]:
            position = self.keys.pop(key)
            self.alive[position] = 0
            self.documents -= 1
            self.words -= self.lengths[position]

    @property
    def sparse(self) -> bool:
        """More dropped documents than live ones: a fresh read is smaller."""
        return len(self.ids) > 2 * self.documents + 64

    def search(
        self, terms: list[str], thread_id: str | None, limit: int
    ) -> list[tuple[str, float]]:
        """BM25 (`core/keywords.py`) of the live documents holding a term, best first."""
        if not self.documents:
            return []
        alive = np.frombuffer(self.alive, dtype=np.bool_)
        lengths = np.frombuffer(self.lengths, dtype=np.intc)
        mean = self.words / self.documents or 1.0
        found: list[npt.NDArray[Any]] = []
        weights: list[npt.NDArray[np.float64]] = []
        for term in terms:
            if term not in self.postings:
                continue
            positions = np.frombuffer(self.postings[term][0], dtype=np.intc)
            counts = np.frombuffer(self.postings[term][1], dtype=np.intc)
            if self.documents < len(self.ids):  # some dropped: skip theirs
                live = alive[positions]
                positions, counts = positions[live], counts[live]
            n = len(positions)
            if not n:
                continue
            idf = max(math.log((self.documents - n + 0.5) / (n + 0.5)), 1e-6)
            f = counts.astype(np.float64)
            found.append(positions)
            weights.append(idf * f * (K1 + 1) / (f + K1 * (1 - B + B * lengths[positions] / mean)))
        if not found:
            return []
        scores = np.bincount(np.concatenate(found), np.concatenate(weights), len(self.ids))
        hits = np.flatnonzero(scores)
        if thread_id is not None:
            code = self._thread_codes.get(thread_id, -1)
            hits = hits[np.frombuffer(self.threads, dtype=np.intc)[hits] == code]
        rank = np.frombuffer(self.rank, dtype=np.intc)
        if len(hits) > limit:  # those above the limit-th score, and the first ids tied at it
            at = scores[hits]
            floor = np.partition(at, len(hits) - limit)[len(hits) - limit]
            above, tied = hits[at > floor], hits[at == floor]
            need = limit - len(above)
            if len(tied) > need:
                tied = tied[np.argpartition(rank[tied], need - 1)[:need]]
            hits = np.concatenate([above, tied])
        hits = hits[np.lexsort((rank[hits], -scores[hits]))]
        return list(zip([self.ids[p] for p in hits.tolist()], scores[hits].tolist(), strict=True))


class WordIndex:
    """The cached `ResourceWords` of one store's resources. Safe across threads."""

    def __init__(self, db: Database, budget: int = WORD_BUDGET) -> None:
        self.db = db
        self.budget = budget
        self._resources: OrderedDict[str, ResourceWords] = OrderedDict()
        self._held = 0
        self._searched: OrderedDict[str, None] = OrderedDict()
        """Resources searched once, not copied yet (the most recent `REMEMBERED`)."""
        self._lock = threading.Lock()

    def search(
        self, terms: list[str], resource_id: str, thread_id: str | None, limit: int
    ) -> list[tuple[str, float]] | None:
        """The resource's BM25 hits, or None for FTS5 to answer: on the resource's first
        search here (a one-off call, a CLI's, pays for no copy: 0.13 s at 10,000
        messages), and when it is too large to cache."""
        with self._lock:
            if resource_id not in self._resources and resource_id not in self._searched:
                self._searched[resource_id] = None
                if len(self._searched) > REMEMBERED:
                    self._searched.popitem(last=False)
                return None
            cached = self._resources.pop(resource_id, None)
            self._held -= cached.held if cached else 0
            stamp = self.db.changes()  # read before the refresh: a write after it moves it
            if cached is not None and stamp is not None and cached.stamp == stamp:
                current: ResourceWords | None = cached
            else:
                current = self._refresh(resource_id, cached or ResourceWords())
            if current is None:
                return None
            current.stamp = stamp
            self._resources[resource_id] = current
            self._held += current.held
            while self._held > self.budget:
                self._held -= self._resources.popitem(last=False)[1].held
            return current.search(terms, thread_id, limit)

    def _refresh(self, resource_id: str, cached: ResourceWords) -> ResourceWords | None:
        """The cached copy brought up to date, a fresh one, or None when too large."""
        fresh = cached.added == -1
        if fresh and self._too_large(resource_id):  # before its every text is read
            return None
        rows = self._read(resource_id, cached.added, listing=False)
        counters = next((r for r in rows if r[0] == 0), None)
        if counters is None:
            return ResourceWords()
        dropping = not fresh and counters[4] != cached.removed
        if dropping:  # read again, with the keys of the documents still there
            rows = self._read(resource_id, cached.added, listing=True)
            counters = next((r for r in rows if r[0] == 0), counters)
        _, documents, total_words, added, removed = counters[:5]
        if total_words > self.budget:
            return None
        if dropping:
            cached.keep_only({(r[1], r[2]) for r in rows if r[0] == 1})
        cached.add([((r[1], r[2]), r[5], r[6], r[7]) for r in rows if r[0] == 2])
        cached.added, cached.removed = added, removed
        if (cached.documents, cached.words) != (documents, total_words) or cached.sparse:
            if fresh:  # read afresh already: its rows are the truth
                return cached
            return self._refresh(resource_id, ResourceWords())
        return cached

    def _too_large(self, resource_id: str) -> bool:
        rows = self.db.query(f"SELECT words FROM {STATS} WHERE resource_id = ?", (resource_id,))
        return bool(rows) and rows[0][0] > self.budget

    def _read(self, resource_id: str, since: int, listing: bool) -> list[tuple[Any, ...]]:
        return self.db.query(_READ, (resource_id, resource_id, listing, resource_id, since))
