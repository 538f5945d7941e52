"""The engine: one memory's configuration, backends and operations.

`Memory` calls its operations and `AsyncMemory` awaits the same ones (`arun`);
both are thin facades over this object, and nothing else reaches into it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from recallstack.core.api.message_history import MessageHistory
from recallstack.core.api.operations import Operations
from recallstack.core.contracts.embedder import Embedder
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import InvalidInputError
from recallstack.core.recall import SemanticRecall
from recallstack.core.runtime.awaiting import for_the_loop, greenlet_spawn
from recallstack.core.runtime.config import MemoryConfig, fitted
from recallstack.core.runtime.embedding_cache import CachedEmbedder
from recallstack.core.runtime.registry import registry

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", Storage, VectorStore)

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


class Engine:
    """Opens the backends a memory is given as URLs (and closes only those), builds the
    processors and operations over them, and awaits operations (`arun`)."""

    def __init__(
        self,
        storage: Storage | str | None,
        vector: VectorStore | str | None,
        embedder: Embedder | str | None,
        options: MemoryConfig | Mapping[str, Any] | None,
        logger: logging.Logger | None,
        *,
        on_the_loop: bool = False,
    ) -> None:
        self.on_the_loop = on_the_loop
        """Whether the operations run on the event loop (`AsyncMemory`): the processors
        then reach each store as `for_the_loop` gives it."""
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
        vector = self._reach(self.vector) if self.vector is not None else None
        self.operations = Operations(self.config, self.history, self.semantic, vector)

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
        self.config = fitted(self.config, self.storage.keyword_search)
        self.history = MessageHistory(storage=self._reach(self.storage), config=self.config)
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
            storage=self._reach(self.storage),
            vector=self._reach(self.vector),
            embedder=CachedEmbedder(model, awaited=self.on_the_loop),
            config=self.config,
            logger=logger,
        )

    @property
    def embedder(self) -> Embedder | None:
        """The model, when this memory has semantic recall."""
        return self.semantic.embedder.embedder if self.semantic is not None else None

    def _reach(self, store: S) -> S:
        """A store as the processors and operations reach it."""
        return for_the_loop(store) if self.on_the_loop else store

    async def arun(self, operation: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """An operation (a method of `operations` or of a processor), awaited: run on the
        event loop (core/runtime/awaiting.py)."""
        return await greenlet_spawn(operation, *args, **kwargs)

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
            await greenlet_spawn(for_the_loop(store).close)
        built, self.built = self.built, None
        if built is not None:  # both of its clients
            await built.aclose()
            built.close()
