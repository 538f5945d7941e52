"""The engine: one memory's configuration, backends and operations.

`Memory` runs its operations blocking and `AsyncMemory` awaits the same ones;
both are thin facades over this object, and nothing else reaches into it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from recallstack.core.api.message_history import MessageHistory
from recallstack.core.api.operations import Operations
from recallstack.core.contracts.embedder import Embedder, Tokenized
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import InvalidInputError
from recallstack.core.recall import SemanticRecall
from recallstack.core.runtime.awaiting import AwaitedBackend
from recallstack.core.runtime.backends import Backends
from recallstack.core.runtime.calls import Steps, arun, run
from recallstack.core.runtime.config import MemoryConfig
from recallstack.core.runtime.embedding_cache import CachedEmbedder
from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import Matrix

R = TypeVar("R")

DEFAULT_URL = "libsql:///local.db"
STORAGE_ENV, VECTOR_ENV, EMBEDDER_ENV = (
    "RECALLSTACK_STORAGE",
    "RECALLSTACK_VECTOR",
    "RECALLSTACK_EMBEDDER",
)
"""The variables `Memory.from_env()` and the CLI read."""


def backends_from_env() -> tuple[str | None, str | None, str | None]:
    """The storage, vector store and embedder the environment names (None: the default)."""
    storage, vector, embedder = (
        os.environ.get(v) or None for v in (STORAGE_ENV, VECTOR_ENV, EMBEDDER_ENV)
    )
    return storage, vector, embedder


class AwaitedBackends(NamedTuple):
    """`Backends` whose calls are awaited (`AwaitedBackend`; the embedder's `aembed`)."""

    storage: AwaitedBackend
    vector_store: AwaitedBackend | None
    cached_embedder: AwaitedEmbedder | None


@dataclass(frozen=True)
class AwaitedEmbedder:
    """The embedding cache, whose `embed` is its `aembed`."""

    cache: CachedEmbedder

    async def embed(self, inputs: Sequence[str | Tokenized]) -> Matrix:
        return await self.cache.aembed(inputs)


class Engine:
    """Opens the backends a memory is given as URLs (and closes only those), builds the
    processors over them, and runs operations blocking (`run`) or awaited (`arun`)."""

    def __init__(
        self,
        storage: Storage | str | None,
        vector: VectorStore | str | None,
        embedder: Embedder | str | None,
        options: MemoryConfig | Mapping[str, Any] | None,
        logger: logging.Logger | None,
    ) -> None:
        self.config = MemoryConfig.model_validate(options or {})
        self.opened: list[Storage | VectorStore] = []
        """What this memory opened from URLs, and so closes; never what the caller passed."""
        self.built: Embedder | None = None
        """The embedder this memory built from a name, and so closes."""
        try:
            self._build(storage, vector, embedder, logger)
        except BaseException:
            self.close()
            raise
        self.backends = Backends(
            self.storage, self.vector, self.semantic.embedder if self.semantic else None
        )
        self.operations = Operations(self.config, self.history, self.semantic, self.vector)

    def _build(
        self,
        storage: Storage | str | None,
        vector: VectorStore | str | None,
        embedder: Embedder | str | None,
        logger: logging.Logger | None,
    ) -> None:
        if isinstance(embedder, str):  # first: a bad name is refused before a file is made
            self.built = registry().embedder(embedder)
        if isinstance(storage, Storage):
            self.storage = storage
        else:
            self.storage = registry().storage(storage or DEFAULT_URL)
            self.opened.append(self.storage)
        self.history = MessageHistory(storage=self.storage, config=self.config)
        self.semantic: SemanticRecall | None = None
        self.vector: VectorStore | None = None
        """The vector store; without an embedder, the one given (or the default, beside
        the default storage), so that deletes and edits reach vectors others wrote."""
        if embedder is None and self.config.semantic_recall:
            raise InvalidInputError(
                "semantic recall needs an embedder, e.g. 'local/all-MiniLM-L6-v2'"
            )
        if isinstance(vector, VectorStore):
            self.vector = vector
        elif embedder is not None or vector is not None or storage in (None, DEFAULT_URL):
            self.vector = registry().vector_store(vector or DEFAULT_URL)
            self.opened.append(self.vector)
        if embedder is None or self.vector is None:
            return
        model = embedder if isinstance(embedder, Embedder) else self.built
        assert model is not None
        self.semantic = SemanticRecall(
            storage=self.storage,
            vector=self.vector,
            embedder=model,
            config=self.config,
            logger=logger,
        )

    @property
    def embedder(self) -> Embedder | None:
        """The model, when this memory has semantic recall."""
        return self.semantic.embedder.embedder if self.semantic is not None else None

    def run(self, steps: Steps[R]) -> R:
        """An operation, on the blocking backends."""
        return run(steps, self.backends)

    @functools.cached_property
    def awaited(self) -> AwaitedBackends:
        """The backends, awaited: made on first use, which only `AsyncMemory` makes."""
        return AwaitedBackends(
            AwaitedBackend(self.storage),
            AwaitedBackend(self.vector) if self.vector is not None else None,
            AwaitedEmbedder(self.semantic.embedder) if self.semantic else None,
        )

    async def arun(self, steps: Steps[R]) -> R:
        """An operation, awaited: each store on the loop or in a worker thread."""
        return await arun(steps, self.awaited)

    def close(self) -> None:
        """Close what this memory opened and built (not what was passed in); idempotent."""
        opened, self.opened = self.opened, []
        for store in reversed(opened):
            store.close()
        built, self.built = self.built, None
        if built is not None:
            built.close()

    async def aclose(self) -> None:
        """`close`, each store's close awaited as its other calls are."""
        opened, self.opened = self.opened, []
        for store in reversed(opened):
            await AwaitedBackend(store).close()
        built, self.built = self.built, None
        if built is not None:  # both of its clients
            await built.aclose()
            built.close()
