"""The backends a memory's operations reach: one record, read by attribute
(core/runtime/calls.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recallstack.core.contracts.storage import Storage
    from recallstack.core.contracts.vector_store import VectorStore
    from recallstack.core.runtime.embedding_cache import CachedEmbedder


@dataclass(frozen=True)
class Backends:
    """`call(Storage.get_thread, ...)` runs `storage.get_thread`, `call(VectorStore.query,
    ...)` `vector_store.query`, `call(CachedEmbedder.embed, ...)` `cached_embedder.embed`.

    A memory without an embedder has no `cached_embedder`, and may have no
    `vector_store`; its operations make no such call then."""

    storage: Storage
    vector_store: VectorStore | None = None
    cached_embedder: CachedEmbedder | None = None
