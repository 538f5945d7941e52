"""Shared test helpers."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest_plugins = ["pytester"]

PLUGINS = Path(__file__).parent / "plugins"


def install_plugin(target: Path, module: str, entry_point: str) -> Path:
    """Install a plugin module from tests/plugins as a real distribution in `target`.

    Writes the module and a `.dist-info` with its `recallstack` entry point, the
    same files pip would write; add `target` to sys.path to make it visible.
    """
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(PLUGINS / f"{module}.py", target / f"{module}.py")
    dist = target / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[recallstack]\n{entry_point} = {module}\n")
    return target


@pytest.fixture
def example_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example third-party plugin, installed and importable for this test.

    Visible in this process and, through PYTHONPATH, in the processes it starts.
    """
    return _visible(
        install_plugin(tmp_path / "site", "recallstack_example", "example"), monkeypatch
    )


@pytest.fixture
def broken_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plugin whose `$ne` is wrong, installed for this test."""
    path = install_plugin(tmp_path / "broken-site", "recallstack_broken", "broken")
    return _visible(path, monkeypatch)


def _visible(path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(path), *sys.path]))
    return path


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """One private Postgres + pgvector for the session (or $RECALLSTACK_PG_URL)."""
    from recallstack.adapters.pg.targets import server

    with server() as url:
        yield url


@pytest.fixture
def new_pg_database(pg_server: str) -> Iterator[Callable[[], str]]:
    """Makes fresh, empty databases on the session's server, dropped afterwards."""
    import psycopg

    made: list[str] = []

    def make() -> str:
        name = f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        made.append(name)
        return urlsplit(pg_server)._replace(path=f"/{name}").geturl()

    yield make
    with psycopg.connect(pg_server, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def pg_url(new_pg_database: Callable[[], str]) -> str:
    """A fresh, empty database on the session's server, dropped afterwards."""
    return new_pg_database()


@pytest.fixture
def pinecone_emulator() -> Iterator[tuple[Any, str]]:
    """A fresh loopback emulator of Pinecone's API, and a store URL that reaches it."""
    from recallstack.adapters.pinecone.emulator import API_KEY, Emulator

    emulator = Emulator()
    with emulator.start() as host:
        yield emulator, f"pinecone://t?host={host}&api_key={API_KEY}"
