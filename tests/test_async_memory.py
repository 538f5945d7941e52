"""AsyncMemory: the same answers as Memory, the same errors, closed properly, and an
event loop that goes on while it saves and recalls (a loop-lag probe)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recallstack import AsyncMemory, Memory, Message
from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.core.errors import InvalidInputError, NotFoundError

RECALL = {"last_messages": 2, "semantic_recall": {"top_k": 3, "message_range": 1}}
START = datetime(2024, 5, 1, 9, tzinfo=UTC)
TOPICS = ["sourdough starter", "Kyoto temples", "bike repair", "tax return", "piano lessons"]


def turns(thread_id: str, count: int, offset: int = 0) -> list[Message]:
    return [
        Message(
            id=f"{thread_id}-{n}",
            thread_id=thread_id,
            role="user" if n % 2 == 0 else "assistant",
            content=f"turn {n} about {TOPICS[n % len(TOPICS)]} in {thread_id}",
            created_at=START + timedelta(minutes=offset + n),
        )
        for n in range(count)
    ]


def summary(found: Any) -> Any:
    """What a result says, without the objects' identities."""
    if isinstance(found, list):
        return [summary(f) for f in found]
    if hasattr(found, "model_dump"):
        return found.model_dump()
    if hasattr(found, "__dataclass_fields__"):
        return {k: summary(getattr(found, k)) for k in found.__dataclass_fields__}
    return found


def script_sync(memory: Memory) -> list[Any]:
    out: list[Any] = [memory.update_resource("maya", {"plan": "pro"}).metadata]
    for t in ("a", "b"):
        memory.create_thread("maya", thread_id=t, title=t.upper(), metadata={"k": t})
        out.append(summary(memory.save_messages(turns(t, 12))).get("indexed"))
    out.append(memory.update_thread("b", metadata={"k": "bb"}).indexed)
    memory.delete_messages(["a-3"])
    out.append(summary(memory.recall("a", vector_search_string="bread starter").hits))
    out.append([h.message.id for h in memory.search("maya", "temples", top_k=4)])
    out.append([h.message.id for h in memory.search("maya", "piano", filter={"k": "bb"})])
    out.append(memory.list_threads("maya").total)
    memory.delete_thread("b")
    out.append(memory.get_thread("b"))
    out.append(summary(memory.reindex()))
    return out


async def script_async(memory: AsyncMemory) -> list[Any]:
    out: list[Any] = [(await memory.update_resource("maya", {"plan": "pro"})).metadata]
    for t in ("a", "b"):
        await memory.create_thread("maya", thread_id=t, title=t.upper(), metadata={"k": t})
        out.append(summary(await memory.save_messages(turns(t, 12))).get("indexed"))
    out.append((await memory.update_thread("b", metadata={"k": "bb"})).indexed)
    await memory.delete_messages(["a-3"])
    out.append(summary((await memory.recall("a", vector_search_string="bread starter")).hits))
    out.append([h.message.id for h in await memory.search("maya", "temples", top_k=4)])
    out.append([h.message.id for h in await memory.search("maya", "piano", filter={"k": "bb"})])
    out.append((await memory.list_threads("maya")).total)
    await memory.delete_thread("b")
    out.append(await memory.get_thread("b"))
    out.append(summary(await memory.reindex()))
    return out


@pytest.mark.parametrize("backend", ["memory", "libsql"])
def test_async_memory_answers_as_memory_does(backend: str, tmp_path: Path) -> None:
    def url(name: str) -> str:
        return "memory://" if backend == "memory" else f"libsql:///{tmp_path / name}"

    with Memory(url("sync.db"), url("sync.db"), "hash/32", RECALL) as memory:
        expected = script_sync(memory)

    async def main() -> list[Any]:
        async with AsyncMemory(url("async.db"), url("async.db"), "hash/32", RECALL) as memory:
            return await script_async(memory)

    got = asyncio.run(main())
    assert got == expected
    assert expected[-2] is None and expected[3]  # the script did delete and recall something


def test_postgres_is_awaited_on_its_asyncio_driver(
    new_pg_database: Callable[[], str],
) -> None:
    """AsyncMemory on Postgres answers as Memory does without touching the blocking
    pool: every statement goes through psycopg's AsyncConnectionPool on the loop."""
    url = new_pg_database()
    with Memory(url, url, "hash/32", RECALL) as memory:
        expected = script_sync(memory)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("AsyncMemory used the blocking pool")

    async def main() -> list[Any]:
        url = new_pg_database()
        async with AsyncMemory(url, url, "hash/32", RECALL) as memory:
            assert memory.semantic is not None
            stores = [memory.storage, memory.semantic.vector]
            for store in stores:
                store.db.pool.getconn = refuse  # type: ignore[attr-defined]
                store.db.pool.connection = refuse  # type: ignore[attr-defined]
            got = await script_async(memory)
            pools = [pool for store in stores for pool in store.db.seam.asyncio.held]  # type: ignore[attr-defined]
        assert len(pools) == 2 and all(p.pool.closed for p in pools)  # aclose closed them
        return got

    got = asyncio.run(main())
    assert got == expected
    with pytest.raises(AssertionError, match="blocking pool"):  # the probe is live
        refuse()


def test_awaited_processors_hand_the_model_what_memory_s_do(tmp_path: Path) -> None:
    from recallstack import RequestContext

    def question(n: int) -> Message:
        text = f"tell me about {TOPICS[n % 5]}"
        return Message(id=f"q{n}", thread_id="today", role="user", content=text)

    def reply(n: int) -> Message:
        return Message(id=f"r{n}", thread_id="today", role="assistant", content=f"answer {n}")

    context = RequestContext("today", "maya")
    seen_sync: list[list[str]] = []
    with Memory("memory://", "memory://", "hash/32", RECALL) as memory:
        memory.create_thread("maya", thread_id="a")
        memory.save_messages(turns("a", 12))
        for n in range(3):
            messages = [question(n)]
            for processor in memory.processors:
                messages = processor.process_input(messages, context)
            seen_sync.append([m.content if m.role == "system" else m.id for m in messages])
            for processor in memory.processors:
                processor.process_output_result([*messages, reply(n)], context)

    async def main() -> list[list[str]]:
        seen: list[list[str]] = []
        async with AsyncMemory("memory://", "memory://", "hash/32", RECALL) as memory:
            await memory.create_thread("maya", thread_id="a")
            await memory.save_messages(turns("a", 12))
            for n in range(3):
                messages = [question(n)]
                for processor in memory.processors:
                    messages = await processor.process_input(messages, context)
                seen.append([m.content if m.role == "system" else m.id for m in messages])
                for processor in memory.processors:
                    await processor.process_output_result([*messages, reply(n)], context)
        return seen

    assert asyncio.run(main()) == seen_sync
    assert "q0" in seen_sync[1] and len(seen_sync[2]) > 2  # history and recall both added


def test_async_memory_raises_the_same_errors() -> None:
    async def main() -> None:
        async with AsyncMemory("memory://", "memory://", "hash/8", RECALL) as memory:
            with pytest.raises(InvalidInputError, match="resource_id"):
                await memory.search(123, "x")  # type: ignore[arg-type]
            with pytest.raises(NotFoundError, match="no messages with ids"):
                await memory.update_messages(turns("t", 1))
            await memory.create_thread("maya", thread_id="t")
            with pytest.raises(InvalidInputError, match="another resource"):
                await memory.recall("t", resource_id="sam")
            with pytest.raises(InvalidInputError):
                await memory.save_messages([{"thread_id": "t"}])  # type: ignore[list-item]
            assert (await memory.list_threads("maya")).total == 1  # nothing else was written

    asyncio.run(main())


def test_async_with_closes_what_the_memory_opened_and_nothing_else(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'ctx.db'}"
    mine = LibSQLVectorStore(url)

    async def main() -> Any:
        async with AsyncMemory(url, mine, "hash/8", RECALL) as memory:
            await memory.create_thread("r", thread_id="t")
            return memory

    memory = asyncio.run(main())
    assert memory.storage.db._closed  # type: ignore[attr-defined]
    assert not mine.db._closed  # passed in: still the caller's
    mine.create_index("still-usable", 2)
    mine.close()
    asyncio.run(memory.aclose())  # idempotent


def test_an_unclosed_async_memory_warns_when_collected(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'leak.db'}"
    with pytest.warns(ResourceWarning, match="AsyncMemory was not closed"):
        AsyncMemory(url, url, "hash/8", RECALL)
        gc.collect()


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALLSTACK_STORAGE", "memory://")
    monkeypatch.setenv("RECALLSTACK_VECTOR", "memory://")
    monkeypatch.setenv("RECALLSTACK_EMBEDDER", "hash/16")

    async def main() -> None:
        async with AsyncMemory.from_env(RECALL) as memory:
            await memory.create_thread("r", thread_id="t")
            await memory.save_messages(turns("t", 3))
            assert [h.message.id for h in await memory.search("r", "turn 1", top_k=1)]

    asyncio.run(main())


def test_many_tasks_at_once_on_one_file(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'tasks.db'}"

    async def user(memory: AsyncMemory, n: int) -> int:
        thread = f"t{n}"
        await memory.create_thread(f"user{n}", thread_id=thread)
        for k in range(10):
            saved = await memory.save_messages(turns(thread, 5, offset=5 * k)[:5])
            assert not saved.not_indexed
            await memory.recall(thread, vector_search_string=f"about {TOPICS[k % 5]}")
        return len(await memory.search(f"user{n}", "turn", top_k=100))

    async def main() -> list[int]:
        async with AsyncMemory(url, url, "hash/32", RECALL) as memory:
            return await asyncio.gather(*(user(memory, n) for n in range(8)))

    assert asyncio.run(main()) == [5] * 8  # each user sees exactly its own five messages


def test_real_sizes_through_async_memory(tmp_path: Path) -> None:
    """5,000 messages in one save, top_k 1,000, four users' tasks at once."""
    url = f"libsql:///{tmp_path / 'sizes.db'}"

    async def user(memory: AsyncMemory, n: int) -> tuple[int, int, set[str]]:
        thread = f"big{n}"
        await memory.create_thread(f"user{n}", thread_id=thread)
        saved = await memory.save_messages(turns(thread, 5_000))
        hits = await memory.search(f"user{n}", "about piano lessons", top_k=1_000)
        return len(saved.indexed), len(hits), {h.message.thread_id for h in hits}

    async def main() -> list[tuple[int, int, set[str]]]:
        async with AsyncMemory(url, url, "hash/32", RECALL) as memory:
            return await asyncio.gather(*(user(memory, n) for n in range(4)))

    assert asyncio.run(main()) == [(5_000, 1_000, {f"big{n}"}) for n in range(4)]


# ---- the event loop is never blocked -------------------------------------------------


async def worst_lag(work: Callable[[], Awaitable[None]]) -> float:
    """The longest the loop was late to wake a 1 ms sleeper while `work` ran, in seconds."""
    worst = 0.0
    done = asyncio.Event()

    async def probe() -> None:
        nonlocal worst
        while not done.is_set():
            asked = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - asked - 0.001)

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)
    try:
        await work()
    finally:
        done.set()
        await task
    return worst


LAG_LIMIT = 0.010
"""What 'a few milliseconds' means here: a worker thread holds the interpreter for
at most its 5 ms switch interval before the loop gets it back."""


def conversation_work(memory: AsyncMemory, thread: str) -> Callable[[], Awaitable[None]]:
    async def work() -> None:
        for k in range(6):
            await memory.save_messages(turns(thread, 10, offset=10 * k)[:10])
            await memory.recall(thread, vector_search_string=f"what about {TOPICS[k % 5]}?")
            await memory.search("maya", TOPICS[k % 5], top_k=5)

    return work


@pytest.fixture(scope="module")
def local_model() -> Any:
    from recallstack.core.runtime.registry import registry

    return registry().embedder("local/all-MiniLM-L6-v2")


def lag_on(storage: str, vector: str, embedder: Any) -> tuple[float, float]:
    """The worst loop lag saving and recalling a conversation through AsyncMemory (the
    best of three runs: the system may preempt the loop in one, while blocking code
    delays every one), and through a blocking Memory called on the loop (the control)."""

    async def main() -> tuple[float, float]:
        async with AsyncMemory(storage, vector, embedder, RECALL) as memory:
            for thread in ("warm-up", "lag-async"):
                await memory.create_thread("maya", thread_id=thread)
            await conversation_work(memory, "warm-up")()  # first calls open files and caches
            lags = [await worst_lag(conversation_work(memory, "lag-async")) for _ in range(3)]
        with Memory(storage, vector, embedder, RECALL) as blocking:
            blocking.create_thread("maya", thread_id="lag-sync")

            async def blocked() -> None:
                for k in range(6):
                    blocking.save_messages(turns("lag-sync", 10, offset=10 * k))
                    blocking.recall("lag-sync", vector_search_string=TOPICS[k % 5])
                    await asyncio.sleep(0)

            control = await worst_lag(blocked)
        print(f"worst loop lag {[round(x * 1000, 1) for x in lags]} ms; blocking {control:.3f} s")
        return min(lags), control

    return asyncio.run(main())


@pytest.mark.alone
def test_the_loop_goes_on_during_save_and_recall_on_libsql(
    tmp_path: Path, local_model: Any
) -> None:
    url = f"libsql:///{tmp_path / 'lag.db'}"
    lag, control = lag_on(url, url, local_model)
    assert control > LAG_LIMIT, "the probe must see a blocking Memory"
    assert lag < LAG_LIMIT, f"the loop was blocked for {lag * 1000:.1f} ms"


@pytest.mark.alone
def test_the_loop_goes_on_during_save_and_recall_on_postgres(pg_url: str, local_model: Any) -> None:
    lag, control = lag_on(pg_url, pg_url, local_model)
    assert control > LAG_LIMIT, "the probe must see a blocking Memory"
    assert lag < LAG_LIMIT, f"the loop was blocked for {lag * 1000:.1f} ms"
