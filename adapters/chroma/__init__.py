"""Chroma: in process (persistent folder or memory) and a `chroma run` server.

The `chromadb` driver is imported only when a store is built. Tests start a
real server with `chroma run --path TMP --port P` on loopback.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recallstack.core.capabilities import Capabilities
from recallstack.core.filters import ALL_OPERATORS
from recallstack.core.hookspecs import hookimpl
from recallstack.core.registry import Backend, ConformanceTarget

CAPABILITIES = Capabilities(
    operators=ALL_OPERATORS,
    index_types=frozenset({"hnsw"}),
    exact=False,
    string_ranges=False,
    max_filter_values=2_000,
)
"""Chroma compares only numbers, and its HNSW search is approximate. A list of values
costs Chroma's SQL a few bound variables each, and SQLite allows 32,766 in all."""


def _store(url: str, **options: Any) -> Any:
    from recallstack.adapters.chroma.store import ChromaVectorStore

    return ChromaVectorStore(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="chroma",
            schemes=("chroma", "chroma+http", "chroma+https"),
            factory=_store,
            capabilities=CAPABILITIES,
            extra="chroma",
            requires=("chromadb",),
            description="Chroma, in process or a server (HNSW)",
        )
    )


@contextmanager
def _folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="recallstack-chroma-") as tmp:
        yield f"chroma:///{tmp}"


@contextmanager
def server(host: str = "127.0.0.1") -> Iterator[str]:
    """A real `chroma run` server on a free loopback port, stopped afterwards."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    address = f"[{host}]" if ":" in host else host
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with tempfile.TemporaryDirectory(prefix="recallstack-chroma-server-") as tmp:
        process = subprocess.Popen(
            [chroma, "run", "--path", tmp, "--host", host, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://{address}:{port}/api/v2/heartbeat", timeout=1)
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("chroma run did not start") from None
                    time.sleep(0.2)
            yield f"chroma+http://{address}:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    register(ConformanceTarget(backend="chroma", kind="vector", start=_folder, mode="in process"))
    register(ConformanceTarget(backend="chroma", kind="vector", start=server, mode="server"))
