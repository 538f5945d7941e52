"""How blocking code is awaited: the one async mechanism of recallstack.

Every operation (core/api/operations.py, core/recall/) and every adapter is
written once, as blocking code. `AsyncMemory` runs an operation on the event
loop in a greenlet (`greenlet_spawn`); wherever the code would block, it hands
a coroutine to `await_only`, which suspends it until the loop has awaited that
coroutine, and the loop goes on meanwhile. This is how SQLAlchemy's asyncio
extension runs its ORM over asyncio drivers. There are three such places:

- an adapter whose driver has an asyncio API reaches it through its `Seam`:
  the blocking side, or under `greenlet_spawn` the asyncio side, which awaits
  the driver's coroutines;
- a store without one (`asyncio_driver` False) is reached through
  `InWorkerThread`: each call runs in a worker thread, awaited;
- the embedding cache awaits the model's `aembed` (an HTTP client's, or a
  local model's computation in a worker thread).

greenlet is imported on first use, so that `import recallstack` does not load it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import threading
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
S = TypeVar("S")
_log = logging.getLogger(__name__)


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


def await_whole(awaitable: Awaitable[T]) -> T:
    """`await_only`, but a cancellation that comes meanwhile is raised only once
    `awaitable` has ended: a driver's call cut in the middle can leave its connection
    busy, so that the rollback after it fails (psycopg's pipelined `executemany`)."""
    return await_only(_whole(awaitable))


async def _whole(awaitable: Awaitable[T]) -> T:
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])  # cancelled again here: the task is left to end alone
        raise


async def _entered_whole(manager: AbstractAsyncContextManager[T]) -> T:
    entering = asyncio.ensure_future(manager.__aenter__())
    try:
        return await _whole(entering)
    except asyncio.CancelledError as cancelled:
        if entering.done() and not entering.cancelled() and entering.exception() is None:
            await manager.__aexit__(type(cancelled), cancelled, cancelled.__traceback__)
        raise


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
def entered(manager: AbstractAsyncContextManager[T], *, whole: bool = False) -> Iterator[T]:
    """An asynchronous context manager entered and exited with `await_only`; with
    `whole`, a cancellation waits for the enter or the exit to end (an enter it cut
    that ended is exited again before the cancellation is raised)."""
    wait: Callable[[Awaitable[Any]], Any] = await_whole if whole else await_only
    value = await_only(_entered_whole(manager) if whole else manager.__aenter__())
    try:
        yield value
    except BaseException as exc:
        if not wait(manager.__aexit__(type(exc), exc, exc.__traceback__)):
            raise
    else:
        wait(manager.__aexit__(None, None, None))


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


class Seam(Generic[T]):
    """An adapter's driver: its blocking side and its asyncio side, side by side behind
    one interface `T` (the asyncio side's methods await the driver's coroutines with
    `await_only`). `current()` is the side the calling code runs on: the asyncio one
    under `greenlet_spawn` (made on first use on each loop: `PerLoop`), the blocking
    one everywhere else. The only place an adapter's code tells the two apart."""

    def __init__(
        self,
        blocking: T,
        asyncio: Callable[[], Awaitable[T]] | None = None,
        close: Callable[[Any], Awaitable[object]] | None = None,
    ) -> None:
        self.blocking = blocking
        self.asyncio = None if asyncio is None else PerLoop(asyncio, close or _nothing)
        """Each running loop's asyncio side; None: the driver has no asyncio API."""

    def current(self) -> T:
        """The blocking side, or under `greenlet_spawn` the running loop's asyncio side."""
        if self.asyncio is not None and in_asyncio():
            return self.asyncio.get()
        return self.blocking

    def close(self) -> None:
        """Close every loop's asyncio side (`PerLoop.close`); the blocking side is the
        adapter's to close."""
        if self.asyncio is not None:
            self.asyncio.close()


async def _nothing(_: object) -> None:
    return None


class InWorkerThread:
    """A store without an asyncio driver, as code under `greenlet_spawn` calls it: each
    method runs in a worker thread, awaited with `await_only`, so that the loop goes
    on meanwhile (anywhere else, it is called as it is). The asyncio side of a store
    that has none; other attributes pass through."""

    def __init__(self, store: object) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if in_asyncio():
                return await_only(asyncio.to_thread(attr, *args, **kwargs))
            return attr(*args, **kwargs)

        return call


def for_the_loop(store: S) -> S:
    """The store as an operation on the event loop reaches it: itself when it awaits an
    asyncio driver (`asyncio_driver`), else in a worker thread (`InWorkerThread`)."""
    if getattr(store, "asyncio_driver", False):
        return store
    return cast(S, InWorkerThread(store))


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
    """An asyncio object (a pool, a client) for each running loop.

    Such an object belongs to the loop that made it, so each loop that uses the
    store gets its own, made on first use there. A keeper task on that loop makes
    it, holds it, and closes it when the loop shuts down (`asyncio.run` cancels
    every task then) or when `close()` is called. The caller only waits for the
    making, shielded: a call cancelled meanwhile leaves the object to the next call.
    A loop closed without cancelling its tasks is found closed at the next use, and
    its object dropped (its sockets end with it).
    """

    def __init__(
        self, make: Callable[[], Awaitable[T]], close: Callable[[T], Awaitable[object]]
    ) -> None:
        self._make = make
        self._close = close
        self._kept: dict[asyncio.AbstractEventLoop, _Kept[T]] = {}
        self._lock = threading.Lock()  # loops in several threads share the table

    def get(self) -> T:
        """The running loop's object, for code under `greenlet_spawn`."""
        ready = self._ready()
        if ready.done():
            return ready.result()
        return await_only(asyncio.shield(ready))

    @property
    def held(self) -> list[T]:
        """The objects made and not yet closed, on every loop."""
        with self._lock:
            kept = list(self._kept.values())
        return [
            k.ready.result()
            for k in kept
            if k.ready.done() and not k.ready.cancelled() and k.ready.exception() is None
        ]

    def close(self) -> None:
        """Close every loop's object on its loop: awaited when called from that loop
        under `greenlet_spawn`, waited for when that loop runs in another thread, and
        left to the loop's next turn otherwise (a loop that has stopped runs it if it
        runs again; `asyncio.run` would cancel the keeper anyway)."""
        with self._lock:
            kept, self._kept = self._kept, {}
        for loop, k in kept.items():
            if loop.is_closed():
                continue
            if in_asyncio() and asyncio.get_running_loop() is loop:
                await_only(_stopped(k.keeper))
            elif loop.is_running() and not _runs_here(loop):
                asyncio.run_coroutine_threadsafe(_stopped(k.keeper), loop).result()
            else:
                loop.call_soon_threadsafe(k.keeper.cancel)

    async def aclose(self) -> None:
        """`close()`, for a coroutine: the running loop's object is closed when it returns."""
        with self._lock:
            here = self._kept.pop(asyncio.get_running_loop(), None)
        if here is not None:
            await _stopped(here.keeper)
        self.close()

    def _ready(self) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        with self._lock:
            for gone in [held for held in self._kept if held.is_closed()]:
                del self._kept[gone]
            kept = self._kept.get(loop)
            if kept is None:
                ready: asyncio.Future[T] = loop.create_future()
                keeper = loop.create_task(self._keep(loop, ready), name="recallstack-keeper")
                kept = self._kept[loop] = _Kept(ready, keeper)
        return kept.ready

    async def _keep(self, loop: asyncio.AbstractEventLoop, ready: asyncio.Future[T]) -> None:
        try:
            value = await self._make()
        except BaseException as exc:
            self._forget(loop, ready)  # the next call makes it again
            if isinstance(exc, asyncio.CancelledError):
                ready.cancel()
                raise
            ready.set_exception(exc)
            return
        ready.set_result(value)
        try:
            await loop.create_future()  # until cancelled: the loop's end, or close()
        finally:
            self._forget(loop, ready)
            try:
                await self._close(value)
            except Exception as exc:  # nobody awaits a keeper: say it, without the
                # driver's message (it may quote a URL)
                _log.warning("closing %s failed: %s", type(value).__name__, type(exc).__name__)

    def _forget(self, loop: asyncio.AbstractEventLoop, ready: asyncio.Future[T]) -> None:
        with self._lock:
            if (kept := self._kept.get(loop)) is not None and kept.ready is ready:
                del self._kept[loop]


@dataclass(frozen=True)
class _Kept(Generic[T]):
    ready: asyncio.Future[T]
    """The object, once made (or why it could not be)."""
    keeper: asyncio.Task[None]


async def _stopped(keeper: asyncio.Task[None]) -> None:
    """Cancel a keeper and wait until it has closed what it held."""
    keeper.cancel()
    await asyncio.wait([keeper])


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
