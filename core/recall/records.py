"""What recall hands back (hits, what a save indexed) and what each vector of a message
carries: its id and metadata, which every write path and the filter checks share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recallstack.core.messages import Message
from recallstack.core.metadata import epoch_ms, normalize_metadata
from recallstack.core.records import Thread
from recallstack.core.vectors import PARTITION_KEYS


@dataclass(frozen=True)
class Hit:
    """A recalled message and its score: the best over the query's chunks, or under
    hybrid recall the fused one, with each signal's own score and rank beside it (a
    rank counts from 1 among that signal's candidates)."""

    message_id: str
    thread_id: str
    score: float
    dense_score: float | None = None
    """The semantic similarity (None: not among the semantic candidates)."""
    keyword_score: float | None = None
    """BM25 (None: not among the keyword candidates, or no hybrid recall)."""
    context_score: float | None = None
    """The similarity of the message's contextual vector (None: not among those
    candidates, or no contextual vectors)."""
    dense_rank: int | None = None
    keyword_rank: int | None = None
    context_rank: int | None = None


@dataclass(frozen=True)
class IndexReport:
    """What indexing a batch did: failures are reported, never dropped."""

    indexed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    error: str | None = None
    refused: list[str] = field(default_factory=list)
    """The failed messages the embedder refused: trying them again will not help."""


@dataclass(frozen=True)
class Recalled:
    hits: list[Hit]
    messages: list[Message]
    """The hits and their neighbours, chronological, tagged `source="memory"`."""


def vector_metadata(message: Message, thread: Thread | None) -> dict[str, Any]:
    """What every vector of a message carries but its `chunk` and its partition (the
    store adds `resource_id` and `thread_id`): the thread's metadata, then the reserved
    keys, which win."""
    own = normalize_metadata(thread.metadata if thread else {}, "thread metadata")
    return {
        **{k: v for k, v in own.items() if k not in PARTITION_KEYS},
        "message_id": message.id,
        "role": message.role,
        "created_at": epoch_ms(message.created_at),
    }


def chunk_id(message_id: str, k: int, count: int) -> str:
    """A chunk's vector id: the message id for a single chunk, `<message id>#<k>` otherwise.

    In the message id, `%` and `#` are escaped (`%25`, `%23`), so a `#` in a vector
    id only ever separates a chunk number: the message `x#1` and the second chunk of
    a long message `x` (of another resource, perhaps) can never share a vector.
    """
    if "#" in message_id or "%" in message_id:
        message_id = message_id.replace("%", "%25").replace("#", "%23")
    return message_id if count == 1 else f"{message_id}#{k}"


def is_chunk_id(vector_id: str, message_id: str) -> bool:
    """Whether a vector id is one `chunk_id` gives the message: its own, or `<own>#<k>`."""
    own = chunk_id(message_id, 0, 1)
    number = vector_id[len(own) + 1 :]
    return vector_id == own or (
        vector_id.startswith(own + "#") and number.isdigit() and number.isascii()
    )
