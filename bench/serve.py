"""`recallstack serve` under load, beside the same operations through the Python API.

    python bench/serve.py [--clients 50] [--requests 3000] [--backend libsql|pg]
        [--embedder hash/64]

Starts `recallstack serve` as users start it (a subprocess on a free port, a keys
file, one key per client's user) and has `--clients` clients at once send
`--requests` requests in all over real HTTP: each client, a conversation thread of
its own (ten users, five threads each), saves a message then recalls with a query,
in turn (half saves, half recalls). Then the
same clients do the same through one `AsyncMemory` in this process, on a fresh
database. Prints p50/p95 latency and requests per second of each, and their ratio:
what HTTP costs. Afterwards it checks that every saved message is there: under
concurrency nothing is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from recallstack import AsyncMemory
from recallstack.core.messages import Message

OPTIONS = {"semantic_recall": {"top_k": 4, "message_range": 1, "hybrid": False}}
"""The semantic signal alone: docs/server.md's figures were measured with it."""
TOPICS = ["trains", "ramen", "temples", "hiking", "museums", "sake", "onsen", "gardens"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def postgres_or_file(backend: str, folder: Path, name: str) -> Iterator[str]:
    if backend == "libsql":
        yield f"libsql:///{folder / name}.db"
        return
    from recallstack.adapters.pg.targets import server

    with server() as url:
        yield url


@contextmanager
def serving(db: str, embedder: str, keys: dict[str, str], folder: Path) -> Iterator[str]:
    (folder / "keys.json").write_text(json.dumps(keys))
    port = free_port()
    command = [sys.executable, "-m", "recallstack", "serve", "--storage", db, "--vector", db]
    command += ["--embedder", embedder, "--keys", str(folder / "keys.json"), "--port", str(port)]
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/v1/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise SystemExit((folder / "server.log").read_text())
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


Step = Callable[[int, int], Awaitable[None]]
"""One request of client `c`, its `n`-th."""


async def drive(clients: int, requests: int, step: Step) -> tuple[list[float], float]:
    """Each request's seconds, and the wall time of all."""
    latencies: list[float] = []
    per_client = requests // clients

    async def client(c: int) -> None:
        for n in range(per_client):
            start = time.perf_counter()
            await step(c, n)
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return latencies, time.perf_counter() - start


def text(c: int, n: int) -> str:
    return f"client {c} note {n}: I liked the {TOPICS[(c + n) % len(TOPICS)]} in town {n % 7}"


def query(c: int, n: int) -> str:
    return f"what did I think of the {TOPICS[(c * 3 + n) % len(TOPICS)]}?"


async def over_http(url: str, clients: int, requests: int) -> tuple[list[float], float]:
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        for c in range(clients):
            made = await http.post("/v1/threads", json={"thread_id": f"t{c}"}, headers=key_of(c))
            made.raise_for_status()

        async def step(c: int, n: int) -> None:
            if n % 2 == 0:
                body = {"messages": [{"role": "user", "content": text(c, n)}]}
                answer = await http.post(f"/v1/threads/t{c}/messages", json=body, headers=key_of(c))
            else:
                body = {"thread_id": f"t{c}", "query": query(c, n), "options": OPTIONS}
                answer = await http.post("/v1/recall", json=body, headers=key_of(c))
            answer.raise_for_status()

        return await drive(clients, requests, step)


async def in_process(
    db: str, embedder: str, clients: int, requests: int
) -> tuple[list[float], float]:
    async with AsyncMemory(db, db, embedder, {"semantic_recall": True}) as memory:
        for c in range(clients):
            await memory.create_thread(user(c), thread_id=f"t{c}")

        async def step(c: int, n: int) -> None:
            if n % 2 == 0:
                message = Message(
                    thread_id=f"t{c}", resource_id=user(c), role="user", content=text(c, n)
                )
                await memory.save_messages([message])
            else:
                await memory.recall(f"t{c}", user(c), query(c, n), thread_config=OPTIONS)

        return await drive(clients, requests, step)


def user(c: int) -> str:
    return f"user{c % 10}"


def key(c: int) -> str:
    return f"bench-key-{c % 10:04d}-0123456789"


def key_of(c: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {key(c)}"}


async def saved_count(db: str, embedder: str, clients: int) -> int:
    async with AsyncMemory(db, db, embedder) as memory:
        pages = [await memory.recall(f"t{c}", user(c), per_page=1) for c in range(clients)]
        return sum(page.total for page in pages)


def figures(label: str, latencies: list[float], wall: float) -> dict[str, float]:
    cuts = statistics.quantiles(latencies, n=100)
    row = {"p50_ms": cuts[49] * 1e3, "p95_ms": cuts[94] * 1e3, "rps": len(latencies) / wall}
    print(
        f"{label:<22} {len(latencies):>6,} requests  p50 {row['p50_ms']:7.1f} ms  "
        f"p95 {row['p95_ms']:7.1f} ms  {row['rps']:8,.0f} requests/s",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--backend", choices=["libsql", "pg"], default="libsql")
    parser.add_argument("--embedder", default="hash/64")
    args = parser.parse_args()
    clients, requests = args.clients, args.requests - args.requests % args.clients
    expected = clients * (requests // clients - requests // clients // 2)
    print(
        f"{clients} clients, {requests:,} requests (half saves, half recalls), "
        f"{args.backend}, embedder {args.embedder}, {os.cpu_count()} cores",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with postgres_or_file(args.backend, folder, "http") as db:
            keys = {key(c): user(c) for c in range(clients)}
            with serving(db, args.embedder, keys, folder) as url:
                http = figures(
                    "HTTP (recallstack serve)", *asyncio.run(over_http(url, clients, requests))
                )
            http_saved = asyncio.run(saved_count(db, args.embedder, clients))
        with postgres_or_file(args.backend, folder, "python") as db:
            python = figures(
                "Python API (AsyncMemory)",
                *asyncio.run(in_process(db, args.embedder, clients, requests)),
            )
            python_saved = asyncio.run(saved_count(db, args.embedder, clients))
    print(
        f"HTTP / Python: p50 {http['p50_ms'] / python['p50_ms']:.2f}x, "
        f"p95 {http['p95_ms'] / python['p95_ms']:.2f}x, "
        f"throughput {http['rps'] / python['rps']:.2f}x"
    )
    print(f"saved messages: HTTP {http_saved:,}, Python {python_saved:,}, expected {expected:,}")
    if http_saved != expected or python_saved != expected:
        raise SystemExit("messages were lost under concurrency")


if __name__ == "__main__":
    main()
