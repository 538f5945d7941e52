"""LibSQL vector store: ingest rate and query latency, against the raw driver.

    python bench/libsql_vectors.py [--sizes 10000 100000] [--queries 200]

For each size: N 384-d vectors, each in a resource's thread's partition (100
resources, so a resource's partition holds 1%). Prints ingest vectors/s, query
p50/p95 in ms unfiltered and in a resource's partition, cold (first query
after opening: without the vector file, which that query writes, then with
it) and warm, the first query after a small save (10 new vectors,
written the way `Memory.save_messages` writes them: upsert, then delete the
stale chunks, of which a new message has none) by another store instance,
which sees it as another process would, the raw driver's exact
`vector_distance_cos` ORDER BY query for comparison, and numpy's own scan of
the same matrix (what this machine's memory bandwidth allows).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import libsql
import numpy as np
from workload import upsert_grouped

from recallstack.adapters.libsql.vector import LibSQLVectorStore
from recallstack.adapters.table_names import table_name
from recallstack.core.vectors import EVERYWHERE, Partition, Reach

DIM = 384
RESOURCES = 100


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):7.2f} ms  p95 {p95:7.2f} ms"


def timed(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    return out


def run(size: int, queries: int, folder: Path) -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(size, DIM)).astype(np.float32)
    probes = rng.normal(size=(queries, DIM)).astype(np.float32)
    ids = [f"m{i}" for i in range(size)]
    url = f"libsql:///{folder / f'bench-{size}.db'}"

    store = LibSQLVectorStore(url)
    store.create_index("bench", DIM)
    start = time.perf_counter()
    for lo in range(0, size, 5000):  # each resource's in its partition, as Memory writes
        rows = range(lo, min(size, lo + 5000))
        threads = [Partition(f"r{i % RESOURCES}", f"t{i % 1000}") for i in rows]
        upsert_grouped(store, "bench", ids[lo : rows.stop], data[lo : rows.stop], threads)
    ingest = size / (time.perf_counter() - start)
    store.close()

    print(f"\n== {size:,} vectors x {DIM} ==")
    print(f"ingest                        {ingest:10,.0f} vectors/s")
    cases: list[tuple[str, Reach]] = [
        ("unfiltered", EVERYWHERE),
        ("resource partition (1%)", Partition("r7")),
    ]
    for label, partition in cases:
        colds = []
        for with_file in (False, True):
            if not with_file:
                shutil.rmtree(folder / f"bench-{size}.db-vectors", ignore_errors=True)
            fresh = LibSQLVectorStore(url)
            start = time.perf_counter()
            fresh.query("bench", probes[0], 10, partition=partition)
            colds.append(time.perf_counter() - start)
        warm = timed(
            lambda i, fresh=fresh, partition=partition: fresh.query(
                "bench", probes[i], 10, partition=partition
            ),
            queries,
        )
        print(
            f"{label:28s}  cold {colds[0] * 1000:8.2f} ms from SQL (writes the vector file), "
            f"{colds[1] * 1000:6.2f} ms from the file   warm {percentiles(warm)}"
        )
        fresh.close()

    after_save(url, probes, queries)
    numpy = timed(lambda i: np.argpartition(-(data @ probes[i]), 10)[:10], min(queries, 50))
    print(f"{'numpy exact scan (reference)':28s}  {'':21s} {percentiles(numpy)}")

    raw = libsql.connect(str(folder / f"bench-{size}.db"))
    table = table_name("bench")
    sql = (
        f"SELECT id, vector_distance_cos(embedding, vector32(?)) AS d FROM {table} "
        "{where} ORDER BY d LIMIT 10"
    )
    for label, where, extra in (
        ("raw driver, unfiltered", "", ()),
        (
            "raw driver, resource filter",
            "WHERE json_extract(metadata, '$.resource_id') = ?",
            ("r7",),
        ),
    ):
        q = sql.format(where=where)
        samples = timed(
            lambda i, q=q, extra=extra: raw.execute(
                q, (str(probes[i].tolist()), *extra)
            ).fetchall(),
            min(queries, 50),
        )
        print(f"{label:28s}  {'':21s} {percentiles(samples)}")


def after_save(url: str, probes: np.ndarray, queries: int) -> None:
    """Warm queries, and the first query after each of `rounds` small saves."""
    reader, writer = LibSQLVectorStore(url), LibSQLVectorStore(url)
    reader.query("bench", probes[0], 10, partition=EVERYWHERE)  # load
    rng = np.random.default_rng(1)
    rounds = min(queries, 50)
    warm = timed(lambda i: reader.query("bench", probes[i], 10, partition=EVERYWHERE), rounds)
    after = []
    for r in range(rounds):
        new = [f"new{r}-{k}" for k in range(10)]
        writer.upsert(
            "bench",
            new,
            rng.normal(size=(10, DIM)),
            [{"message_id": i} for i in new],
            partition=EVERYWHERE,
        )
        writer.delete("bench", ids=[f"{i}#0" for i in new], partition=EVERYWHERE)
        writer.delete(
            "bench", filter={"message_id": {"$in": new}, "chunk": {"$gte": 1}}, partition=EVERYWHERE
        )
        start = time.perf_counter()
        reader.query("bench", probes[r], 10, partition=EVERYWHERE)
        after.append(time.perf_counter() - start)
    print(f"{'warm, unfiltered':28s}  {'':21s} {percentiles(warm)}")
    print(f"{'first query after a save':28s}  {'':21s} {percentiles(after)}")
    reader.close()
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            run(size, args.queries, Path(tmp))


if __name__ == "__main__":
    main()
