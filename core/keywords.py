"""Keyword search: the words of a text, and BM25, the ranking every backend keeps.

The keyword signal of hybrid recall. Words are runs of letters and digits,
lowercased, with diacritics removed (the rule of SQLite FTS5's `unicode61
remove_diacritics 2` tokenizer, near enough). Every backend keeps these words
as they are, LibSQL's FTS5 included, so every path finds the same words. BM25 is
FTS5's: k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)) and at least
1e-6, with N, n and the mean length taken over the resource's own messages:
one user's words never change another's ranking.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping

K1, B = 1.2, 0.75
MAX_TERMS = 64
"""A query's distinct words beyond this are ignored: a statement stays bounded."""
_WORD = re.compile(r"[^\W_]+")
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him
    his himself she her hers herself it its itself they them their theirs themselves
    what which who whom this that these those am is are was were be been being have
    has had having do does did doing a an the and but if or because as until while
    of at by for with about against between into through during before after above
    below to from up down in out on off over under again further then once here
    there when where why how all any both each few more most other some such no nor
    not only own same so than too very s t can will just don should now d ll m o re
    ve y""".split()  # noqa: SIM905
)
"""Left out of a query's keywords: in "what is my cat called?" BM25 would otherwise
favour a message that says "is" over one about a kitten. NLTK's English list (from
Porter's); measured on LoCoMo in docs/guide.md. Stored words keep them."""


def words(text: str) -> list[str]:
    """The text's words, in order: lowercased, without diacritics."""
    if text.isascii():  # nothing to fold: five times faster
        return _WORD.findall(text.lower())
    folded = "".join(
        c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn"
    )
    return _WORD.findall(folded)


def query_terms(query: str) -> list[str]:
    """A query's distinct words, in order, at most `MAX_TERMS`, its English stop words
    left out (all of its words when it has no other)."""
    terms = list(dict.fromkeys(words(query)))
    return ([t for t in terms if t not in STOP_WORDS] or terms)[:MAX_TERMS]


def score(
    counts: Mapping[str, int], length: int, total: int, mean: float, frequency: Mapping[str, int]
) -> float:
    """One document's BM25: its word `counts` and `length`, among `total` documents of
    `mean` length, where `frequency[term]` documents hold the term. Statistics read
    apart from the matches may count fewer documents than hold a term (a save came
    between): the total is then taken as that many."""
    result = 0.0
    for term, n in frequency.items():
        f = counts.get(term, 0)
        if f:
            idf = max(math.log((max(total, n) - n + 0.5) / (n + 0.5)), 1e-6)
            result += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length / mean))
    return result


def bm25(terms: Iterable[str], documents: Mapping[str, Counter[str]]) -> dict[str, float]:
    """The BM25 scores of the `documents` (id → word counts) that hold a term."""
    total = len(documents)
    if not total:
        return {}
    mean = sum(sum(c.values()) for c in documents.values()) / total or 1.0
    frequency = {t: sum(1 for c in documents.values() if t in c) for t in terms}
    found = {
        doc_id: counts for doc_id, counts in documents.items() if any(counts[t] for t in frequency)
    }
    return {
        doc_id: score(counts, sum(counts.values()), total, mean, frequency)
        for doc_id, counts in found.items()
    }
