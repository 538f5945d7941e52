"""Cutting texts into chunks that fit an embedder's token limit, losing and altering nothing.

A model reads at most so many *tokens* and silently drops the rest, and a
thousand characters are anything from 190 tokens (English prose) to 1,000
(Chinese). So chunks are measured with the model's own tokenizer, given as a
function from a text to its tokens (`Embedder.tokenize`): each chunk comes
back with its tokens, so the embedder does not tokenize it again.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from recallstack.core.contracts.embedder import Tokenized
from recallstack.core.runtime.embedding_cache import CachedEmbedder

Tokenize = Callable[[str], Tokenized]
"""A text → its tokens: the character offset where each starts, in order."""

SENTENCE_ENDS = frozenset(".!?…;。！？；")  # noqa: RUF001 (the CJK forms, on purpose)
MIN_TOKENS = 8
"""The smallest chunk size allowed: a character is at most 4 tokens (bytes)."""


def chunk_text(text: str, max_tokens: int, tokenize: Tokenize, overlap: int = 0) -> list[Tokenized]:
    """Verbatim slices of `text`, in order, each at most `max_tokens` tokens long.

    A cut falls after a sentence when one ends in the chunk's second half,
    else between words, else between tokens. Consecutive chunks share up to
    `overlap` tokens (at most half a chunk), so a fact on a cut is whole in
    one of them. Every token is in some chunk; a whitespace-only text has no
    chunks.
    """
    if max_tokens < MIN_TOKENS:
        raise ValueError(f"max_tokens must be at least {MIN_TOKENS}, got {max_tokens}")
    if not text.strip():
        return []
    whole = tokenize(text)
    offsets = list(whole.offsets)
    if len(offsets) <= max_tokens:
        return [whole]
    overlap = max(0, min(overlap, max_tokens // 2))
    chunks: list[Tokenized] = []
    start = 0
    while True:
        cut = _cut(text, offsets, start, max_tokens)
        while True:  # a slice may tokenize into a few more tokens than it had in the text
            end = offsets[cut] if cut < len(offsets) else len(text)
            piece = tokenize(text[offsets[start] : end])
            excess = len(piece.offsets) - max_tokens
            if excess <= 0 or cut <= start + 1:
                break
            cut = _first_of_char(offsets, max(start + 1, cut - excess), start)
        if piece.text.strip():
            chunks.append(piece)
        if cut >= len(offsets):
            return chunks
        start = _next_start(text, offsets, start, cut, overlap)


def _cut(text: str, offsets: list[int], start: int, max_tokens: int) -> int:
    """The token index to end the chunk starting at `start` before."""
    end = start + max_tokens
    if end >= len(offsets):
        return len(offsets)
    candidates = range(end, start + max_tokens // 2, -1)
    for is_good in (_sentence_cut, _word_cut):
        for k in candidates:
            if _starts_char(offsets, k) and is_good(text, offsets[k]):
                return k
    return _first_of_char(offsets, end, start)


def _next_start(text: str, offsets: list[int], start: int, cut: int, overlap: int) -> int:
    """Where the next chunk starts: up to `overlap` tokens before the cut, on a sentence
    or word start where there is one."""
    first = max(start + 1, cut - overlap)
    for is_good in (_sentence_cut, _word_cut, _any_cut):
        for k in range(first, cut):
            if _starts_char(offsets, k) and is_good(text, offsets[k]):
                return k
    return cut


def _starts_char(offsets: list[int], k: int) -> bool:
    """Whether token k is the first of its character (a byte-level token may not be)."""
    return k == 0 or offsets[k] != offsets[k - 1]


def _first_of_char(offsets: list[int], k: int, start: int) -> int:
    """Token k, moved back to the first token of its character, but never to `start`."""
    while k > start + 1 and not _starts_char(offsets, k):
        k -= 1
    return k


def _sentence_cut(text: str, at: int) -> bool:
    """A cut before character `at` ends a sentence or a line."""
    i = at - 1
    while i >= 0 and text[i].isspace():
        if text[i] == "\n":
            return True
        i -= 1
    if i < 0 or text[i] not in SENTENCE_ENDS:
        return False
    spaced = i < at - 1 or (at < len(text) and text[at].isspace())
    return spaced or _wide(text[i])


def _word_cut(text: str, at: int) -> bool:
    """A cut before character `at` does not split a word."""
    if at <= 0 or at >= len(text):
        return True
    before, after = text[at - 1], text[at]
    return not (_word_char(before) and _word_char(after))


def _any_cut(text: str, at: int) -> bool:
    return True


def _word_char(char: str) -> bool:
    """A letter or digit of a script that writes spaces between words."""
    return char.isalnum() and not _wide(char)


def _wide(char: str) -> bool:
    """A CJK character: every cut next to one falls between words."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def chunks(embedder: CachedEmbedder, text: str, overlap: int) -> list[Tokenized]:
    """A text cut into chunks the embedder's model takes whole, each with its tokens."""
    model = embedder.embedder
    return chunk_text(text, model.max_input, model.tokenize, overlap)
