"""AsyncMemory: `Memory` for asyncio, with the same methods awaited and the same behaviour.

Both run the same code (`core/api/operations.py`): `AsyncMemory` runs it on the
event loop, and wherever it would block it awaits instead (core/runtime/awaiting.py):
a store's asyncio driver (Postgres, a Chroma server, Pinecone, a Qdrant server,
MongoDB: docs/async.md), a worker thread for a store without one (LibSQL,
`memory://`, the in-process engines), and `Embedder.aembed` for embedding.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from recallstack.core.api.doctor import Checkup, State
from recallstack.core.api.memory import Memory
from recallstack.core.api.message_history import MessageHistory
from recallstack.core.api.operations import (
    RecallResult,
    SaveResult,
    SearchHit,
    ThreadUpdateResult,
)
from recallstack.core.api.reindexing import ReindexResult
from recallstack.core.contracts.embedder import Embedder
from recallstack.core.contracts.processor import RequestContext
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.messages import Message
from recallstack.core.recall import SemanticRecall
from recallstack.core.records import Resource, Thread, ThreadPage
from recallstack.core.runtime.config import MemoryConfig
from recallstack.core.runtime.engine import Engine, backends_from_env


class AsyncMemory:
    """Long-term conversational memory for asyncio: `Memory`'s constructor and methods,
    awaited. `async with AsyncMemory(...) as mem:` closes what it opened.

    Constructing opens the backends and loads the embedder's model, which blocks
    as `Memory(...)` does: build it at startup, or `await asyncio.to_thread(AsyncMemory, ...)`.
    """

    def __init__(
        self,
        storage: Storage | str | None = None,
        vector: VectorStore | str | None = None,
        embedder: Embedder | str | None = None,
        options: MemoryConfig | Mapping[str, Any] | None = None,
        *,
        logger: logging.Logger | None = None,
    ) -> None:
        self._engine = Engine(storage, vector, embedder, options, logger, on_the_loop=True)
        self.config = self._engine.config
        self.storage = self._engine.storage
        self.vector = self._engine.vector
        self.history = self._engine.history
        self.semantic = self._engine.semantic

    @classmethod
    def from_env(
        cls,
        options: MemoryConfig | Mapping[str, Any] | None = None,
        *,
        logger: logging.Logger | None = None,
    ) -> AsyncMemory:
        """A memory on the backends the environment names, as `Memory.from_env()`."""
        return cls(*backends_from_env(), options, logger=logger)

    @property
    def processors(self) -> list[AwaitedProcessor]:
        """The processors of an agent loop, as `Memory.processors`, awaited."""
        built: list[MessageHistory | SemanticRecall] = [self.history]
        if self.semantic is not None:
            built.append(self.semantic)
        return [AwaitedProcessor(p, self._engine) for p in built]

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None and engine.opened:
            warnings.warn(
                "AsyncMemory was not closed: use `async with AsyncMemory(...)` or aclose()",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )

    async def aclose(self) -> None:
        """Close the stores this memory opened from URLs and the embedder it built from a
        name (not those passed in); idempotent."""
        await self._engine.aclose()

    # ---- resources ----------------------------------------------------------------

    async def get_resource(self, resource_id: str) -> Resource | None:
        return await self._engine.arun(self._engine.operations.get_resource, resource_id)

    async def update_resource(self, resource_id: str, metadata: Mapping[str, Any]) -> Resource:
        """`Memory.update_resource`."""
        return await self._engine.arun(
            self._engine.operations.update_resource, resource_id, metadata
        )

    # ---- threads ----------------------------------------------------------------

    async def create_thread(
        self,
        resource_id: str,
        *,
        thread_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Thread:
        """`Memory.create_thread`."""
        return await self._engine.arun(
            self._engine.operations.create_thread, resource_id, thread_id, title, metadata
        )

    async def get_thread(self, thread_id: str) -> Thread | None:
        return await self._engine.arun(self._engine.operations.get_thread, thread_id)

    async def list_threads(self, resource_id: str, **paging: Any) -> ThreadPage:
        return await self._engine.arun(self._engine.operations.list_threads, resource_id, paging)

    async def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ThreadUpdateResult:
        """`Memory.update_thread`."""
        return await self._engine.arun(
            self._engine.operations.update_thread, thread_id, title, metadata
        )

    async def delete_thread(self, thread_id: str) -> None:
        """`Memory.delete_thread`."""
        await self._engine.arun(self._engine.operations.delete_thread, thread_id)

    # ---- messages ----------------------------------------------------------------

    async def get_messages(self, ids: Sequence[str]) -> list[Message]:
        """`Memory.get_messages`."""
        return await self._engine.arun(self._engine.operations.get_messages, ids)

    async def save_messages(
        self,
        messages: Sequence[Message],
        thread_config: Mapping[str, Any] | None = None,
        *,
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> SaveResult:
        """`Memory.save_messages`."""
        return await self._engine.arun(
            self._engine.operations.save_messages, messages, thread_config, vectors
        )

    async def update_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """`Memory.update_messages`."""
        return await self._engine.arun(
            self._engine.operations.update_messages, messages, thread_config
        )

    async def delete_messages(self, ids: Sequence[str]) -> None:
        """`Memory.delete_messages`."""
        await self._engine.arun(self._engine.operations.delete_messages, ids)

    # ---- recall ------------------------------------------------------------------

    async def recall(
        self,
        thread_id: str,
        resource_id: str | None = None,
        vector_search_string: str | None = None,
        per_page: int | None = None,
        page: int = 0,
        thread_config: Mapping[str, Any] | None = None,
    ) -> RecallResult:
        """`Memory.recall`."""
        return await self._engine.arun(
            self._engine.operations.recall,
            thread_id,
            resource_id,
            vector_search_string,
            per_page,
            page,
            thread_config,
        )

    async def search(
        self,
        resource_id: str,
        query: str,
        *,
        top_k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        threshold: float | None = None,
        thread_id: str | None = None,
    ) -> list[SearchHit]:
        """`Memory.search`."""
        return await self._engine.arun(
            self._engine.operations.search, resource_id, query, top_k, filter, threshold, thread_id
        )

    async def reindex(
        self, batch_size: int = 256, progress: Callable[[int, int], None] | None = None
    ) -> ReindexResult:
        """`Memory.reindex`; `progress` is called on the event loop."""
        return await self._engine.arun(self._engine.operations.reindex, batch_size, progress)

    async def doctor(self, *, repair: bool = False) -> Checkup:
        """`Memory.doctor`, in a worker thread: a `Memory` over the same stores and
        configuration reads them blocking (a one-off walk of the whole store)."""
        memory = Memory(self.storage, self.vector, self._engine.embedder, self.config)
        try:
            return await asyncio.to_thread(memory.doctor, repair=repair)
        finally:
            memory.close()

    async def index_states(self, messages: Sequence[Message]) -> dict[str, dict[str, State]]:
        """`Memory.index_states`, in a worker thread as `doctor` runs."""
        memory = Memory(self.storage, self.vector, self._engine.embedder, self.config)
        try:
            return await asyncio.to_thread(memory.index_states, messages)
        finally:
            memory.close()


class AwaitedProcessor:
    """A built-in processor whose methods are awaited as the memory that owns it awaits
    its operations (`Engine.arun`)."""

    def __init__(self, processor: MessageHistory | SemanticRecall, engine: Engine) -> None:
        self.id = processor.id
        self.name = processor.name
        self._processor = processor
        self._engine = engine

    async def process_input(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """`process_input` of the processor, awaited."""
        return await self._engine.arun(self._processor.process_input, messages, context)

    async def process_output_result(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """`process_output_result` of the processor, awaited."""
        return await self._engine.arun(self._processor.process_output_result, messages, context)
