"""core/runtime/awaiting.py: blocking-style code that awaits, under greenlet_spawn."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from recallstack.conformance.async_api import loop_thread
from recallstack.core.runtime.awaiting import (
    Awaiting,
    InWorkerThread,
    PerLoop,
    Seam,
    await_only,
    await_whole,
    drained,
    entered,
    for_the_loop,
    greenlet_spawn,
    in_asyncio,
    sleep,
)


class Closing:
    """An asynchronous context manager that records how it was left."""

    def __init__(self) -> None:
        self.exits: list[object] = []

    async def __aenter__(self) -> str:
        await asyncio.sleep(0)
        return "entered"

    async def __aexit__(self, kind: object, *rest: object) -> bool:
        await asyncio.sleep(0)
        self.exits.append(kind)
        return False


def blocking_style(delay: float) -> tuple[bool, str, float]:
    started = asyncio.get_running_loop().time()
    with entered(Closing()) as value:
        await_only(asyncio.sleep(delay))
    return in_asyncio(), value, asyncio.get_running_loop().time() - started


def test_spawned_code_awaits_and_the_loop_goes_on() -> None:
    async def main() -> list[tuple[bool, str, float]]:
        return await asyncio.gather(*(greenlet_spawn(blocking_style, 0.05) for _ in range(20)))

    results = asyncio.run(main())
    assert all(inside and value == "entered" for inside, value, _ in results)
    assert max(took for _, _, took in results) < 0.5  # 20 sleeps of 50 ms overlapped


def test_errors_travel_both_ways() -> None:
    manager = Closing()

    def fails_inside() -> None:
        with entered(manager):
            await_only(asyncio.sleep(0))
            raise KeyError("from the blocking side")

    def catches_the_awaited_error() -> str:
        try:
            await_only(asyncio.wait_for(asyncio.sleep(1), timeout=0.01))
        except TimeoutError:
            return "caught"
        return "not raised"

    async def main() -> str:
        with pytest.raises(KeyError, match="blocking side"):
            await greenlet_spawn(fails_inside)
        return await greenlet_spawn(catches_the_awaited_error)

    assert asyncio.run(main()) == "caught"
    assert manager.exits == [KeyError]


def test_await_only_needs_greenlet_spawn() -> None:
    assert not in_asyncio()
    sleeping = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="greenlet_spawn"):
        await_only(sleeping)
    sleeping.close()


def test_sleep_and_drained() -> None:
    async def numbers() -> AsyncIterator[int]:
        for n in range(3):
            await asyncio.sleep(0)
            yield n

    def blocking_style() -> list[int]:
        sleep(0.01)
        return drained(numbers())

    assert asyncio.run(greenlet_spawn(blocking_style)) == [0, 1, 2]


class Made:
    """What a `PerLoop` made and closed, on which loop."""

    def __init__(self, fail_first: int = 0, pause: float = 0.0) -> None:
        self.made: list[asyncio.AbstractEventLoop] = []
        self.closed: list[asyncio.AbstractEventLoop] = []
        self.fail_first = fail_first
        self.pause = pause

    async def make(self) -> int:
        await asyncio.sleep(self.pause)
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("the server is down")
        self.made.append(asyncio.get_running_loop())
        return len(self.made)

    async def close(self, _: int) -> None:
        await asyncio.sleep(0)
        self.closed.append(asyncio.get_running_loop())


def test_per_loop_makes_one_object_per_loop_and_closes_it_when_the_loop_ends() -> None:
    record = Made()
    held = PerLoop(record.make, record.close)

    def use() -> int:
        first = held.get()
        assert held.get() == first  # the same loop finds the same object
        return first

    async def twice() -> tuple[int, int]:
        return await greenlet_spawn(use), await greenlet_spawn(held.get)

    assert [asyncio.run(twice()) for _ in range(3)] == [(1, 1), (2, 2), (3, 3)]
    assert record.closed == record.made  # each closed on its loop, as the loop ended
    assert held.held == []


def test_per_loop_close_awaits_its_loop_and_waits_for_another_threads_loop() -> None:
    record = Made()
    held = PerLoop(record.make, record.close)

    async def main() -> None:
        await greenlet_spawn(held.get)
        await greenlet_spawn(held.close)
        # both closed before close() returned: here and on the other thread's loop
        assert sorted(map(id, record.closed)) == sorted(map(id, record.made))
        assert held.held == []
        assert asyncio.all_tasks() == {asyncio.current_task()}  # no keeper left

    with loop_thread() as other:
        asyncio.run_coroutine_threadsafe(greenlet_spawn(held.get), other).result()
        asyncio.run(main())
    assert len(record.made) == 2


def test_per_loop_aclose_closes_this_loops_object_before_returning() -> None:
    record = Made()
    held = PerLoop(record.make, record.close)

    async def main() -> None:
        await greenlet_spawn(held.get)
        await held.aclose()
        assert record.closed == record.made
        assert await greenlet_spawn(held.get) == 2  # used again: made again

    asyncio.run(main())
    assert len(record.closed) == 2


def test_per_loop_failed_making_raises_and_the_next_call_makes_again() -> None:
    record = Made(fail_first=1)
    held = PerLoop(record.make, record.close)

    async def main() -> int:
        with pytest.raises(ConnectionError, match="down"):
            await greenlet_spawn(held.get)
        return await greenlet_spawn(held.get)

    assert asyncio.run(main()) == 1


def test_per_loop_a_cancelled_call_leaves_the_making_to_the_next() -> None:
    """The first call is cancelled while the object is being made: the making goes on,
    shielded, and the next call gets that object, made once."""
    record = Made(pause=0.05)
    held = PerLoop(record.make, record.close)

    async def main() -> int:
        first = asyncio.create_task(greenlet_spawn(held.get))
        await asyncio.sleep(0.01)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await greenlet_spawn(held.get)

    assert asyncio.run(main()) == 1
    assert len(record.made) == 1 and record.closed == record.made


def test_per_loop_serves_loops_in_four_threads_at_once() -> None:
    record = Made(pause=0.01)
    held = PerLoop(record.make, record.close)
    got: list[int] = []

    def on_its_own_loop() -> None:
        async def main() -> list[int]:
            return [await greenlet_spawn(held.get) for _ in range(20)]

        values = asyncio.run(main())
        assert len(set(values)) == 1
        got.append(values[0])

    threads = [threading.Thread(target=on_its_own_loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == [1, 2, 3, 4] and len(record.closed) == 4


def test_awaiting_gives_an_asyncio_object_its_blocking_twins_methods() -> None:
    """Each method call's coroutine is awaited; its result and its errors come back."""

    class Driver:
        async def add(self, a: int, b: int = 0) -> int:
            await asyncio.sleep(0)
            return a + b

        async def fail(self) -> None:
            await asyncio.sleep(0)
            raise KeyError("gone")

    def blocking(client: Awaiting) -> int:
        with pytest.raises(KeyError, match="gone"):
            client.fail()
        result: int = client.add(2, b=3)
        return result

    assert asyncio.run(greenlet_spawn(blocking, Awaiting(Driver()))) == 5


def test_per_loop_a_failing_close_is_one_warning_without_the_drivers_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def make() -> str:
        return "client"

    async def close(_: str) -> None:
        raise ConnectionError("postgresql://app:hunter2@db/app is gone")

    held = PerLoop(make, close)

    async def main() -> None:
        assert await greenlet_spawn(held.get) == "client"

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())  # the keeper closes as the loop ends
        gc.collect()
    assert [r.getMessage() for r in caplog.records] == ["closing str failed: ConnectionError"]


# ---- the seam, and a store without an asyncio driver ------------------------------------


class Blocking:
    """A blocking driver: records the thread each call ran in."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.label = "blocking"

    def ping(self, delay: float = 0.0) -> str:
        self.threads.append(threading.get_ident())
        import time

        time.sleep(delay)
        return "blocking"

    def fail(self) -> None:
        raise KeyError("gone")


class AsyncSide:
    async def ping(self) -> str:
        await asyncio.sleep(0)
        return "asyncio"


def test_a_seam_gives_the_side_the_calling_code_runs_on() -> None:
    """Blocking code gets the blocking side; under greenlet_spawn it gets the running
    loop's asyncio side, made once per loop and closed with the seam."""
    made: list[AsyncSide] = []
    closed: list[AsyncSide] = []

    async def make() -> Awaiting:
        made.append(AsyncSide())
        return Awaiting(made[-1])

    async def close(side: Awaiting) -> None:
        closed.append(side._target)

    seam: Seam[object] = Seam(Blocking(), make, close)
    bare: Seam[object] = Seam(Blocking())  # a driver with no asyncio API

    def calls() -> list[str]:
        return [seam.current().ping(), seam.current().ping(), bare.current().ping()]  # type: ignore[attr-defined]

    assert calls() == ["blocking", "blocking", "blocking"]

    async def main() -> list[str]:
        got = await greenlet_spawn(calls)
        await greenlet_spawn(seam.close)
        return got

    assert asyncio.run(main()) == ["asyncio", "asyncio", "blocking"]
    assert asyncio.run(main()) == ["asyncio", "asyncio", "blocking"]  # another loop
    assert len(made) == 2 and closed == made


def test_a_store_without_an_asyncio_driver_runs_in_a_worker_thread_on_the_loop() -> None:
    """Under greenlet_spawn each call runs in a worker thread and the loop goes on (five
    blocking sleeps of 0.2 s overlap); anywhere else it runs where it is called.
    Results, errors and plain attributes come through; a store with an asyncio driver
    is reached as it is."""
    store = Blocking()
    reached = for_the_loop(store)
    assert isinstance(reached, InWorkerThread) and reached.label == "blocking"

    def blocking_code() -> str:
        with pytest.raises(KeyError, match="gone"):
            reached.fail()
        return reached.ping(0.2)

    assert blocking_code() == "blocking" and store.threads == [threading.get_ident()]

    async def main() -> tuple[list[str], float]:
        started = asyncio.get_running_loop().time()
        got = await asyncio.gather(*(greenlet_spawn(blocking_code) for _ in range(5)))
        return got, asyncio.get_running_loop().time() - started

    got, took = asyncio.run(main())
    assert got == ["blocking"] * 5 and threading.get_ident() not in store.threads[1:]
    assert took < 0.8  # 1 s of blocking sleeps, overlapped in worker threads

    class Native(Blocking):
        asyncio_driver = True

    native = Native()
    assert for_the_loop(native) is native


def cancelled_midway(function: Callable[[], object]) -> None:
    """Run `function` under `greenlet_spawn` and cancel it 10 ms in (in a 50 ms wait of
    the tests below); the cancellation must come out."""

    async def main() -> None:
        task = asyncio.ensure_future(greenlet_spawn(function))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancelled_call_awaited_whole_ends_before_the_cancellation_is_raised() -> None:
    """`await_whole` (the Postgres cursor's calls): a cancellation waits for the driver's
    call to end, so its connection is idle for the rollback; `await_only` cuts it."""
    ended: list[str] = []

    async def driver_call(name: str) -> str:
        await asyncio.sleep(0.05)
        ended.append(name)
        return name

    cancelled_midway(lambda: await_whole(driver_call("whole")))
    cancelled_midway(lambda: await_only(driver_call("cut")))
    assert ended == ["whole"]


def test_a_context_entered_whole_exits_whole_when_cancelled_in_its_exit() -> None:
    """`entered(..., whole=True)` (a Postgres transaction, a COPY): a cancellation that
    comes during the exit is raised once the exit has ended."""
    steps: list[str] = []

    class Slow:
        async def __aenter__(self) -> Slow:
            steps.append("entered")
            return self

        async def __aexit__(self, *exc: object) -> bool:
            await asyncio.sleep(0.05)
            steps.append("exited")
            return False

    def block() -> None:
        with entered(Slow(), whole=True):
            steps.append("ran")

    cancelled_midway(block)  # in the exit's sleep
    assert steps == ["entered", "ran", "exited"]


def test_a_context_whose_enter_a_cancellation_cuts_is_entered_then_left() -> None:
    """`entered(..., whole=True)`: a cancellation during the enter waits for it, then
    exits the context (a transaction begun is rolled back) before it is raised."""
    steps: list[str] = []

    class SlowToEnter:
        async def __aenter__(self) -> SlowToEnter:
            await asyncio.sleep(0.05)
            steps.append("entered")
            return self

        async def __aexit__(self, kind: object, *exc: object) -> bool:
            steps.append(f"exited with {getattr(kind, '__name__', kind)}")
            return False

    def block() -> None:
        with entered(SlowToEnter(), whole=True):
            steps.append("ran")

    cancelled_midway(block)  # in the enter's sleep
    assert steps == ["entered", "exited with CancelledError"]
