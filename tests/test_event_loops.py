"""AsyncMemory under real event-loop use, on backends with a native asyncio driver:
one loop after another (`asyncio.run` in a loop), loops in several threads at once,
calls cancelled at any instant, and `aclose()` leaving no task behind.

Postgres and a `chroma run` server are real engines. Stand-ins, where no engine
runs here: Pinecone's emulator, reached through the real SDK's `AsyncPinecone`;
MongoDB's `mongomock://`, through pymongo's asyncio calls over mongomock
(`AsyncStandIn`); and Qdrant's local mode reached through `AsyncQdrantClient`, the
client a Qdrant server is awaited through.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallstack import AsyncMemory, Memory, Message
from recallstack.core.api.operations import RecallResult
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.runtime.awaiting import greenlet_spawn

pytestmark = pytest.mark.filterwarnings(
    "error",  # an unclosed socket or transport, a coroutine never awaited: a failure
    "ignore:XDG_RUNTIME_DIR:UserWarning",  # platformdirs, as chromadb starts
    # what another test in this process left for the collector: `loop_trouble` checks
    # this test's own
    "default::pytest.PytestUnraisableExceptionWarning",
)
NATIVE = [
    "pg",
    "chroma-server",
    "pinecone (stand-in)",
    "mongo (stand-in)",
    "qdrant asyncio client (stand-in)",
]
Stores = tuple[str, "str | VectorStore"]
RECALL = {"last_messages": 2, "semantic_recall": {"top_k": 3, "message_range": 1}}
TOPICS = ["sourdough starter", "Kyoto temples", "bike repair", "tax return", "piano lessons"]


@pytest.fixture(scope="module")
def chroma_server() -> Iterator[str]:
    from recallstack.adapters.chroma.targets import server

    with server() as url:
        yield url


@pytest.fixture(params=NATIVE)
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Storage and vector store: both on Postgres or on MongoDB; else LibSQL storage
    beside the native-async vector store."""
    if request.param == "pg":
        url = request.getfixturevalue("pg_url")
        yield url, url
        return
    if request.param == "mongo (stand-in)":
        from recallstack.adapters.mongo.targets import stand_in

        with stand_in() as url:
            yield url, url
        return
    storage = f"libsql:///{tmp_path / 'storage.db'}"
    if request.param == "chroma-server":
        yield storage, request.getfixturevalue("chroma_server")
    elif request.param == "pinecone (stand-in)":
        yield storage, request.getfixturevalue("pinecone_emulator")[1]
    else:  # one in-memory engine: the store is shared, and closed here
        from recallstack.core.runtime.registry import registry

        store = registry().vector_store("qdrant+local://:memory:", asyncio_local=True)
        yield storage, store
        store.close()


def messages(thread_id: str, count: int) -> list[Message]:
    return [
        Message(
            id=f"{thread_id}-{n}",
            thread_id=thread_id,
            role="user",
            content=f"turn {n} about {TOPICS[n % len(TOPICS)]}",
        )
        for n in range(count)
    ]


def top(result: RecallResult) -> str:
    """The best recalled message's text."""
    by_id = {m.id: m for m in result.messages}
    return by_id[result.hits[0].message_id].content


def seeded(urls: Stores, threads: int = 1) -> None:
    with Memory(*urls, "hash/32", RECALL) as memory:
        for t in range(threads):
            memory.create_thread("maya", thread_id=f"t{t}")
            memory.save_messages(messages(f"t{t}", 10))


@contextmanager
def loop_trouble(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails when the test leaves trouble: a socket or transport it did not close, a
    coroutine never awaited (Python warnings are errors here, and those raised as an
    object is collected are recorded), a task destroyed while pending, an exception
    never retrieved, a callback that raised (asyncio logs those)."""
    import sys
    import warnings

    gc.collect()  # what earlier tests left behind is theirs, reported to pytest
    leaked: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda raised: leaked.append(f"{raised.exc_value!r}")
    try:
        with caplog.at_level(logging.WARNING), warnings.catch_warnings():
            warnings.simplefilter("error")
            yield
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert leaked == []
    trouble = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert trouble == []


def test_one_loop_after_another(urls: Stores, caplog: pytest.LogCaptureFixture) -> None:
    """100 successive `asyncio.run` calls on one memory: each loop gets its own pool or
    client, closed as that loop ends."""
    seeded(urls)
    memory = AsyncMemory(*urls, "hash/32", RECALL)
    with loop_trouble(caplog):
        for n in range(100):
            thread = asyncio.run(memory.get_thread("t0"))
            assert thread is not None and thread.resource_id == "maya"
            if n % 25 == 0:
                result = asyncio.run(memory.recall("t0", vector_search_string="piano"))
                assert "piano" in top(result)
        asyncio.run(memory.aclose())


def test_loops_in_four_threads_at_once(urls: Stores, caplog: pytest.LogCaptureFixture) -> None:
    seeded(urls)
    memory = AsyncMemory(*urls, "hash/32", RECALL)
    errors: list[BaseException] = []

    def on_its_own_loop(n: int) -> None:
        async def work() -> None:
            await memory.create_thread("maya", thread_id=f"w{n}")
            await memory.save_messages(messages(f"w{n}", 5))
            for _ in range(5):
                found = await memory.recall(f"w{n}", vector_search_string="bike repair")
                assert "bike repair" in top(found)
                assert await memory.get_thread("t0") is not None

        try:
            asyncio.run(work())
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    with loop_trouble(caplog):
        workers = [threading.Thread(target=on_its_own_loop, args=(n,)) for n in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert not any(w.is_alive() for w in workers), "a loop hung"
        assert errors == []
        asyncio.run(memory.aclose())
    with Memory(*urls, "hash/32", RECALL) as memory_after:
        assert memory_after.list_threads("maya").total == 5


def test_a_call_cancelled_at_any_instant_leaves_the_memory_usable(
    urls: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """Each example is a fresh loop, so the first call there opens the loop's pool or
    client: cancelling it at a random instant covers the opening too. The next call,
    on the same loop and on the next, answers."""
    seeded(urls)
    memory = AsyncMemory(*urls, "hash/32", RECALL)
    saved = iter(range(10**6))

    @settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        call=st.sampled_from(["get_thread", "recall", "save"]),
        ticks=st.integers(0, 30),
        pause=st.sampled_from([0.0, 0.001, 0.005, 0.02]),
    )
    def cancelled_then_used(call: str, ticks: int, pause: float) -> None:
        async def once() -> None:
            if call == "get_thread":
                doing = memory.get_thread("t0")
            elif call == "recall":
                doing = memory.recall("t0", vector_search_string="temples")
            else:
                n = next(saved)
                doing = memory.save_messages(
                    [Message(id=f"c{n}", thread_id="t0", role="user", content=f"aside {n}")]
                )
            task = asyncio.ensure_future(doing)
            for _ in range(ticks):
                await asyncio.sleep(0)
            await asyncio.sleep(pause)
            task.cancel()
            await asyncio.wait([task])
            found = await memory.recall("t0", vector_search_string="Kyoto temples")
            assert "Kyoto temples" in top(found)

        asyncio.run(once())

    with loop_trouble(caplog):
        cancelled_then_used()
        assert asyncio.run(memory.get_thread("t0")) is not None
        asyncio.run(memory.aclose())


def test_aclose_leaves_no_task_behind(urls: Stores) -> None:
    seeded(urls)

    async def main() -> set[asyncio.Task[object]]:
        memory = AsyncMemory(*urls, "hash/32", RECALL)
        await memory.recall("t0", vector_search_string="tax")
        await memory.aclose()
        if isinstance(urls[1], VectorStore):  # a store passed in is the caller's to close
            await greenlet_spawn(urls[1].close)
        await asyncio.sleep(0)
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    assert asyncio.run(main()) == set()
