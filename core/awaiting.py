"""Blocking-style adapter code that awaits an asyncio driver, without a second copy.

An adapter whose driver has an asyncio API (psycopg's `AsyncConnection`, ...)
keeps one implementation of the contract. `AsyncMemory` calls its methods through
`greenlet_spawn`, on the event loop; where the adapter reaches its driver it
checks `in_asyncio()` and, when true, hands the driver's coroutine to
`await_only`, which suspends the method until the loop has awaited it. This is
how SQLAlchemy's asyncio extension runs its ORM over asyncio drivers. The
adapter declares it with `asyncio_driver = True` (`Storage`, `VectorStore`);
other adapters are called in a worker thread.

greenlet is a dependency of the extras whose adapters do this; it is imported
on first use.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def greenlet_installed() -> bool:
    """Whether greenlet is installed (the extras whose stores use this module bring it)."""
    return importlib.util.find_spec("greenlet") is not None


def in_asyncio() -> bool:
    """Whether this code runs under `greenlet_spawn`, so that it may `await_only`."""
    greenlet = sys.modules.get("greenlet")  # never imported: nothing was spawned
    return greenlet is not None and isinstance(greenlet.getcurrent(), _spawned_class())


def await_only(awaitable: Awaitable[T]) -> T:
    """The result of `awaitable`, awaited by the event loop that runs this code's
    `greenlet_spawn`; this code is suspended meanwhile and the loop goes on."""
    import greenlet

    current = greenlet.getcurrent()
    if not isinstance(current, _spawned_class()):
        raise RuntimeError("await_only() needs code started by greenlet_spawn()")
    parent = current.parent
    assert parent is not None  # a spawned greenlet's parent is the coroutine awaiting for it
    result: T = parent.switch(awaitable)
    return result


async def greenlet_spawn(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)`, run here on the event loop: each `await_only` in
    it is awaited, and its exceptions are raised back into it."""
    import greenlet

    spawned = _spawned_class()(function, greenlet.getcurrent())
    spawned.gr_context = greenlet.getcurrent().gr_context  # the task's context variables
    result: Any = spawned.switch(*args, **kwargs)
    while not spawned.dead:
        try:
            value = await result
        except BaseException:
            result = spawned.throw(*sys.exc_info())
        else:
            result = spawned.switch(value)
    return result  # type: ignore[no-any-return]


@contextmanager
def entered(manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
    """An asynchronous context manager entered and exited with `await_only`."""
    value = await_only(manager.__aenter__())
    try:
        yield value
    except BaseException as exc:
        if not await_only(manager.__aexit__(type(exc), exc, exc.__traceback__)):
            raise
    else:
        await_only(manager.__aexit__(None, None, None))


def drained(items: AsyncIterable[T]) -> list[T]:
    """Every item of an asynchronous iterable (a driver's paginator, say), read with
    `await_only`."""

    async def collect() -> list[T]:
        return [item async for item in items]

    return await_only(collect())


def sleep(seconds: float) -> None:
    """`time.sleep`, or, under `greenlet_spawn`, `asyncio.sleep` awaited: the loop goes
    on meanwhile."""
    if in_asyncio():
        await_only(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def finish_on(loop: asyncio.AbstractEventLoop, work: Callable[[], Awaitable[object]]) -> None:
    """Run `work` (closing an asyncio client, say) on the loop its client belongs to:
    awaited when this code runs there under `greenlet_spawn`, on the loop's thread
    when the loop runs in another one. The work of a loop that has stopped is dropped:
    its sockets end with the process."""
    if in_asyncio() and asyncio.get_running_loop() is loop:
        await_only(work())
    elif loop.is_running() and not _runs_here(loop):
        asyncio.run_coroutine_threadsafe(_awaited(work), loop).result()


class Awaiting:
    """An asyncio object (a driver's client, collection, ...) with its blocking twin's
    methods: each call's coroutine is awaited with `await_only`. Adapters subclass it
    for the methods whose shapes differ."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return await_only(method(*args, **kwargs))

        return call


class PerLoop(Generic[T]):
    """An asyncio object (a pool, a client) for the running loop. Such an object
    belongs to the loop that made it, so it is made on first use there, and made again
    when the store is used from another loop. For code under `greenlet_spawn`."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._held: tuple[asyncio.AbstractEventLoop, T] | None = None

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        if self._held is None or self._held[0] is not loop:
            self._held = (loop, self._make())
        return self._held[1]

    @property
    def held(self) -> T | None:
        """What was made last, whichever loop it belongs to."""
        return None if self._held is None else self._held[1]

    def close(self, work: Callable[[T], Awaitable[object]]) -> None:
        """Run `work` on what is held, on its loop (`finish_on`), and forget it."""
        if self._held is not None:
            loop, value = self._held
            self._held = None
            finish_on(loop, lambda: work(value))


async def _awaited(work: Callable[[], Awaitable[object]]) -> None:
    await work()


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


@functools.cache
def _spawned_class() -> type:
    """The greenlet class `greenlet_spawn` runs code in (made on first use, so that
    importing this module needs no greenlet)."""
    import greenlet

    class Spawned(greenlet.greenlet):
        """A greenlet whose parent is the coroutine that awaits for it."""

    return Spawned
