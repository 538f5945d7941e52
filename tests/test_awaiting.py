"""core/awaiting.py: blocking-style code that awaits, under greenlet_spawn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from recallstack.conformance.async_api import loop_thread
from recallstack.core.awaiting import (
    Awaiting,
    PerLoop,
    await_only,
    drained,
    entered,
    finish_on,
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


def test_sleep_drained_and_finish_on() -> None:
    async def numbers() -> AsyncIterator[int]:
        for n in range(3):
            await asyncio.sleep(0)
            yield n

    finished: list[str] = []

    async def finish(where: str) -> None:
        await asyncio.sleep(0)
        finished.append(where)

    def blocking_style(loop: asyncio.AbstractEventLoop) -> list[int]:
        sleep(0.01)
        items = drained(numbers())
        finish_on(loop, lambda: finish("on its loop, awaited"))
        return items

    async def main() -> list[int]:
        return await greenlet_spawn(blocking_style, asyncio.get_running_loop())

    assert asyncio.run(main()) == [0, 1, 2]
    with loop_thread() as loop:  # a loop running in another thread: run there
        finish_on(loop, lambda: finish("on its loop's thread"))
    stopped = asyncio.new_event_loop()
    finish_on(stopped, lambda: finish("never"))  # a loop that does not run: dropped
    stopped.close()
    assert finished == ["on its loop, awaited", "on its loop's thread"]


def test_per_loop_makes_one_object_per_loop_and_closes_it_on_its_loop() -> None:
    made: list[asyncio.AbstractEventLoop] = []
    closed: list[asyncio.AbstractEventLoop] = []
    held = PerLoop(lambda: made.append(asyncio.get_running_loop()) or len(made))

    async def close(_: int) -> None:
        closed.append(asyncio.get_running_loop())

    def use() -> int:
        first = held.get()
        assert held.get() == first  # the same loop finds the same object
        return first

    async def on_a_loop(close_it: bool) -> int:
        got = await greenlet_spawn(use)
        if close_it:
            await greenlet_spawn(held.close, close)
        return got

    assert asyncio.run(on_a_loop(False)) == 1
    assert asyncio.run(on_a_loop(True)) == 2  # another loop: another object, closed there
    assert len(made) == 2 and closed == made[1:] and held.held is None


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
