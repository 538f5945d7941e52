"""The async API driven from the synchronous cases, so that one parametrisation runs
every case through it as well: Memory-level cases through `AsyncMemory`, storage- and
vector-level cases through the stores awaited as `AsyncMemory` awaits them."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.runtime.awaiting import for_the_loop, greenlet_spawn


class Awaited:
    """An `AsyncMemory`, one of its processors or an awaited store, whose coroutine
    methods are awaited on an event loop running in another thread, each call waiting
    for its result; other attributes pass through."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.target = target
        self._loop = loop

    @property
    def processors(self) -> list[Awaited]:
        """`AsyncMemory.processors`, each awaited the same way."""
        return [Awaited(p, self._loop) for p in self.target.processors]

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.target, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def awaited(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), self._loop).result()

        return awaited


@contextmanager
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a daemon thread until the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="conformance-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def memory_maker(api: str, loop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    """`Memory`, or `AsyncMemory` behind `Awaited`, built from `Memory`'s arguments."""
    from recallstack.core.api.memory import Memory

    if api == "Memory":
        return Memory
    return lambda *args, **kwargs: Awaited(AsyncMemory(*args, **kwargs), loop)


class AwaitedStore:
    """A store whose methods are awaited as `AsyncMemory` reaches it: on the event loop
    (`greenlet_spawn`), through its asyncio driver or a worker thread (`for_the_loop`)."""

    def __init__(self, store: Any) -> None:
        self._store = for_the_loop(store)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await greenlet_spawn(attr, *args, **kwargs)

        return call


def backend_maker(api: str, loop: asyncio.AbstractEventLoop) -> Callable[[Any], Any]:
    """The store itself, or the store as `AsyncMemory` awaits it (`AwaitedStore`) behind
    `Awaited`."""
    if api == "blocking":
        return lambda store: store
    return lambda store: Awaited(AwaitedStore(store), loop)
