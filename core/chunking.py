"""Splitting long texts into chunks an embedder accepts."""

from __future__ import annotations


def chunk_text(text: str, max_chars: int) -> list[str]:
    """Pack words into chunks of at most `max_chars` characters, on word boundaries.

    A word longer than a chunk is split hard. Whitespace-only text gives no
    chunks; no chunk is ever empty.
    """
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    chunks: list[str] = []
    current = ""
    for word in text.split():
        while len(word) > max_chars:
            if current:
                chunks.append(current)
                current = ""
            chunks.append(word[:max_chars])
            word = word[max_chars:]
        if not word:
            continue
        if current and len(current) + 1 + len(word) > max_chars:
            chunks.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        chunks.append(current)
    return chunks
