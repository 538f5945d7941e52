"""AsyncMemory: `Memory` for asyncio, with the same methods awaited and the same behaviour.

Both run the same steps (`core/operations.py`); only how a backend call is made
differs. A store whose driver has an asyncio API (Postgres, a Chroma server,
Pinecone, a Qdrant server, MongoDB: docs/async.md) is called on the event loop
and awaits it (`asyncio_driver`, core/awaiting.py); the others (LibSQL, `memory://`, the
in-process engines: docs/async.md) are called in a worker thread, so the
loop goes on while their drivers work. Embedding awaits `Embedder.aembed`: an
`httpx.AsyncClient` for `openai/...`, a worker thread for a local model.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from recallstack.core.awaiting import greenlet_installed, greenlet_spawn
from recallstack.core.calls import arun
from recallstack.core.config import MemoryConfig
from recallstack.core.doctor import Checkup
from recallstack.core.embedder import Embedder
from recallstack.core.embedding_cache import CachedEmbedder
from recallstack.core.memory import Memory, backends_from_env
from recallstack.core.message_history import MessageHistory
from recallstack.core.messages import Message
from recallstack.core.operations import (
    Operations,
    RecallResult,
    ReindexResult,
    SaveResult,
    SearchHit,
    ThreadUpdateResult,
)
from recallstack.core.processor import RequestContext
from recallstack.core.records import Resource, Thread, ThreadPage
from recallstack.core.semantic_recall import SemanticRecall
from recallstack.core.storage import Storage
from recallstack.core.vector_store import VectorStore


class AwaitedBackend:
    """A store whose methods are awaited: on the event loop when it awaits its
    driver's asyncio API (`asyncio_driver`, and greenlet, which its extra brings, is
    installed), else in a worker thread."""

    def __init__(self, backend: object) -> None:
        self._backend = backend
        native = getattr(backend, "asyncio_driver", False) and greenlet_installed()
        self._spawn: Callable[..., Awaitable[Any]] = greenlet_spawn if native else asyncio.to_thread

    def __getattr__(self, name: str) -> Any:
        """A method, awaited; any other attribute as it is."""
        method = getattr(self._backend, name)
        if not callable(method):
            return method

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            return await self._spawn(method, *args, **kwargs)

        return awaited


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
        memory = Memory(storage, vector, embedder, options, logger=logger)
        # closed by aclose(), not by Memory
        self._opened, memory._opened = memory._opened, []
        self._built, memory._built = memory._built, None
        self.config = memory.config
        self.storage = memory.storage
        self.history = memory.history
        self.semantic = memory.semantic
        self.vector = memory.vector
        self._ops = Operations(memory.config, memory.history, memory.semantic, memory.vector)
        self._backends: dict[str, object] = {
            name: AwaitedBackend(b) for name, b in memory._backends.items()
        }
        if memory.semantic is not None:  # the embedder awaits its model: see Embedder.aembed
            self._backends["CachedEmbedder"] = _AwaitedCache(memory.semantic.embedder)

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
        return [AwaitedProcessor(p, self._backends) for p in built]

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if getattr(self, "_opened", None):
            warnings.warn(
                "AsyncMemory was not closed: use `async with AsyncMemory(...)` or aclose()",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )

    async def aclose(self) -> None:
        """Close the stores this memory opened from URLs and the embedder it built from a
        name (not those passed in); idempotent."""
        opened, self._opened = self._opened, []
        for store in reversed(opened):
            await AwaitedBackend(store).close()
        built, self._built = self._built, None
        if built is not None:  # the embedder this memory built from a name: both its clients
            await built.aclose()
            built.close()

    # ---- resources ----------------------------------------------------------------

    async def get_resource(self, resource_id: str) -> Resource | None:
        return await arun(self._ops.get_resource(resource_id), self._backends)

    async def update_resource(self, resource_id: str, metadata: Mapping[str, Any]) -> Resource:
        """`Memory.update_resource`."""
        return await arun(self._ops.update_resource(resource_id, metadata), self._backends)

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
        steps = self._ops.create_thread(resource_id, thread_id, title, metadata)
        return await arun(steps, self._backends)

    async def get_thread(self, thread_id: str) -> Thread | None:
        return await arun(self._ops.get_thread(thread_id), self._backends)

    async def list_threads(self, resource_id: str, **paging: Any) -> ThreadPage:
        return await arun(self._ops.list_threads(resource_id, paging), self._backends)

    async def update_thread(
        self, thread_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> ThreadUpdateResult:
        """`Memory.update_thread`."""
        return await arun(self._ops.update_thread(thread_id, title, metadata), self._backends)

    async def delete_thread(self, thread_id: str) -> None:
        """`Memory.delete_thread`."""
        await arun(self._ops.delete_thread(thread_id), self._backends)

    # ---- messages ----------------------------------------------------------------

    async def save_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """`Memory.save_messages`."""
        return await arun(self._ops.save_messages(messages, thread_config), self._backends)

    async def update_messages(
        self, messages: Sequence[Message], thread_config: Mapping[str, Any] | None = None
    ) -> SaveResult:
        """`Memory.update_messages`."""
        return await arun(self._ops.update_messages(messages, thread_config), self._backends)

    async def delete_messages(self, ids: Sequence[str]) -> None:
        """`Memory.delete_messages`."""
        await arun(self._ops.delete_messages(ids), self._backends)

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
        steps = self._ops.recall(
            thread_id, resource_id, vector_search_string, per_page, page, thread_config
        )
        return await arun(steps, self._backends)

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
        steps = self._ops.search(resource_id, query, top_k, filter, threshold, thread_id)
        return await arun(steps, self._backends)

    async def reindex(
        self, batch_size: int = 256, progress: Callable[[int, int], None] | None = None
    ) -> ReindexResult:
        """`Memory.reindex`; `progress` is called on the event loop."""
        return await arun(self._ops.reindex(batch_size, progress), self._backends)

    async def doctor(self, *, repair: bool = False) -> Checkup:
        """`Memory.doctor`, in a worker thread: a `Memory` over the same stores and
        configuration reads them blocking (a one-off walk of the whole store)."""
        embedder = self.semantic.embedder.embedder if self.semantic is not None else None
        memory = Memory(self.storage, self.vector, embedder, self.config)
        try:
            return await asyncio.to_thread(memory.doctor, repair=repair)
        finally:
            memory.close()


class AwaitedProcessor:
    """A built-in processor whose methods are awaited: the same steps, over
    `AsyncMemory`'s backends."""

    def __init__(
        self, processor: MessageHistory | SemanticRecall, backends: Mapping[str, object]
    ) -> None:
        self.id = processor.id
        self.name = processor.name
        self._processor = processor
        self._backends = backends

    async def process_input(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """`process_input` of the processor, awaited."""
        steps = self._processor.process_input_steps(messages, context)
        return await arun(steps, self._backends)

    async def process_output_result(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """`process_output_result` of the processor, awaited."""
        steps = self._processor.process_output_steps(messages, context)
        return await arun(steps, self._backends)


class _AwaitedCache:
    """The memory's embedding cache, whose `embed` is awaited."""

    def __init__(self, cache: CachedEmbedder) -> None:
        self.embed = cache.aembed
