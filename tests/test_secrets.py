"""Secrets never leave the process: connecting with wrong, malformed and unreachable
URLs to each backend, every error, every log record (of every logger, at every
level, ours and the drivers') and everything written to stdout and stderr is free
of the password or API key; a server that cannot be reached is one error that names
it, and no warning repeats meanwhile.

Postgres and Chroma are real servers; MongoDB, Qdrant, Pinecone and the OpenAI
embedder are reached at loopback ports where nothing listens, so what is checked
there is the refusal path.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any

import pytest

from recallstack import AsyncMemory
from recallstack.core.errors import BackendError, InvalidInputError, RecallstackError
from recallstack.core.runtime.registry import registry

SECRET = "hunter2Zq9"


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pg_cases(pg_url: str) -> list[tuple[str, str, type[RecallstackError], str | None]]:
    socket_dir = pg_url.partition("host=")[2]
    port = closed_port()
    return [
        ("wrong user and password", f"postgresql://app:{SECRET}@/postgres?host={socket_dir}",
         BackendError, None),
        ("unencoded % in the password", f"postgresql://app:{SECRET}%zz@localhost/app",
         InvalidInputError, None),
        ("malformed IPv6 host", f"postgresql://app:{SECRET}@[::1/app", InvalidInputError, None),
        ("unreachable", f"postgresql://app:{SECRET}@127.0.0.1:{port}/app",
         BackendError, f"127.0.0.1:{port}"),
        ("bad connect_timeout", f"postgresql://app:{SECRET}@localhost/app?connect_timeout=0",
         InvalidInputError, "connect_timeout"),
    ]  # fmt: skip


def server_cases() -> list[tuple[str, str, str, type[RecallstackError], str | None]]:
    port = closed_port()
    fast = "serverSelectionTimeoutMS=500"
    return [
        ("mongodb unreachable", "storage", f"mongodb://app:{SECRET}@127.0.0.1:{port}/app?{fast}",
         BackendError, f"127.0.0.1:{port}"),
        ("mongodb unencoded %", "storage", f"mongodb://app:{SECRET}%zz@localhost/app",
         InvalidInputError, None),
        ("mongodb malformed host", "storage", f"mongodb://app:{SECRET}@[::1/app",
         InvalidInputError, None),
        ("qdrant unreachable", "vector", f"qdrant://127.0.0.1:{port}?api_key={SECRET}",
         BackendError, f"127.0.0.1:{port}"),
        ("qdrant malformed host", "vector", f"qdrant://[::1?api_key={SECRET}",
         InvalidInputError, None),
        ("chroma unreachable", "vector", f"chroma+http://127.0.0.1:{port}?token={SECRET}",
         BackendError, f"127.0.0.1:{port}"),
        ("pinecone unreachable", "vector",
         f"pinecone://t?host=http://127.0.0.1:{port}&api_key={SECRET}",
         BackendError, f"127.0.0.1:{port}"),
        ("pinecone malformed host", "vector", f"pinecone://t?host=[::1&api_key={SECRET}",
         InvalidInputError, None),
    ]  # fmt: skip


def leaks(
    attempt: Callable[[], Any],
    expected: type[RecallstackError],
    names: str | None,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Run `attempt`, which must raise `expected`, and check everything it said."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG), pytest.raises(expected) as raised:  # every logger
        attempt()
    said = [str(raised.value), repr(raised.value)]
    cause = raised.value.__cause__
    while cause is not None:  # the driver's exception travels with ours
        said.append(str(cause))
        cause = cause.__cause__
    handler = logging.Formatter()
    records = [handler.format(record) for record in caplog.records]  # with tracebacks
    out, err = capfd.readouterr()
    for text in [*said, *records, out, err]:
        assert SECRET not in text
        assert SECRET.replace("Zq", "") not in text
    if names is not None:
        assert names in str(raised.value)
    loud = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == len(set(loud)), f"a warning repeated: {loud}"


def test_postgres_urls_never_show_the_password(
    pg_url: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    for _, url, expected, names in pg_cases(pg_url):
        leaks(lambda: registry().storage(url), expected, names, caplog, capfd)  # noqa: B023
        leaks(lambda: registry().vector_store(url), expected, names, caplog, capfd)  # noqa: B023


@pytest.mark.parametrize("case", range(len(server_cases())))
def test_server_urls_never_show_the_secret(
    case: int, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    _, kind, url, expected, names = server_cases()[case]

    def attempt() -> None:
        if kind == "storage":
            registry().storage(url)
            return
        store = registry().vector_store(url)  # Pinecone connects on first use
        try:
            store.list_indexes()
        finally:
            store.close()

    leaks(attempt, expected, names, caplog, capfd)


def test_the_openai_embedder_never_shows_its_key(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    from recallstack.embedders.openai import OpenAIEmbedder

    base = f"http://127.0.0.1:{closed_port()}/v1"
    embedder = OpenAIEmbedder(
        "some-model", base_url=base, api_key=SECRET, dimensions=8, max_retries=1, backoff=0.01
    )
    leaks(lambda: embedder.embed(["hello"]), BackendError, None, caplog, capfd)
    leaks(lambda: asyncio.run(embedder.aembed(["hello"])), BackendError, None, caplog, capfd)
    embedder.close()


def test_a_postgres_gone_after_the_memory_was_built_is_one_error_naming_it(
    new_pg_database: Callable[[], str],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """AsyncMemory opens each loop's pool after a first connection: a server that
    stopped answering meanwhile is one `BackendError`, not the pool's retries."""
    url = new_pg_database()
    memory = AsyncMemory(url, url, "hash/8")
    database = memory.storage.db  # type: ignore[attr-defined]
    port = closed_port()
    database.url = f"postgresql://app:{SECRET}@127.0.0.1:{port}/app"
    leaks(
        lambda: asyncio.run(memory.get_thread("t")),
        BackendError,
        f"127.0.0.1:{port}",
        caplog,
        capfd,
    )
    database.url = url
    assert asyncio.run(memory.get_thread("t")) is None  # and it answers again
    asyncio.run(memory.aclose())
