"""Qdrant Edge and Chroma (in process) through recallstack, against their raw APIs.

    python bench/qdrant_chroma.py [--sizes 10000 100000] [--queries 200] [--only qdrant|chroma]

For each size: N 384-d vectors (clustered like text embeddings) with
resource_id / thread_id metadata, 100 resources so a resource filter selects
1%. The same points go, with plain metadata, into a second shard or
collection through the raw API. Prints ingest vectors/s and query p50/p95
with and without the filter for both, and their ratio. recallstack searches
Edge shards on one thread (`search_threads=1`), so raw Edge is timed twice: with
Edge's default search pool, as a raw user gets it, and reopened with one
search thread, the same setting.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as q

from recallstack.core.registry import registry

DIM = 384
RESOURCES = 100


def clustered(size: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(max(1, size // 50), DIM))
    data = centers[rng.integers(0, len(centers), size)] + 0.6 * rng.normal(size=(size, DIM))
    probes = data[rng.integers(0, size, queries)] + 0.6 * rng.normal(size=(queries, DIM))
    return data.astype(np.float32), probes.astype(np.float32)


def timed(fn: Callable[[int], Any], n: int) -> float:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    ms = sorted(s * 1000 for s in samples)
    p50, p95 = statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"    p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    return p50


def compare(label: str, ours: Callable[[int], Any], raw: Callable[[int], Any], n: int) -> None:
    print(f"query, {label}: recallstack")
    mine = timed(ours, n)
    print(f"query, {label}: raw")
    theirs = timed(raw, n)
    print(f"    ratio {mine / theirs:.2f}x")


def ingest(label: str, write: Callable[[], None], size: int) -> float:
    start = time.perf_counter()
    write()
    rate = size / (time.perf_counter() - start)
    print(f"ingest, {label}: {rate:,.0f} vectors/s")
    return rate


def run_chroma(size: int, queries: int, folder: Path) -> None:
    import chromadb

    data, probes = clustered(size, queries)
    meta = [{"resource_id": f"r{i % RESOURCES}", "thread_id": f"t{i % 1000}"} for i in range(size)]
    ids = [f"m{i}" for i in range(size)]
    print(f"\n== Chroma in process, {size:,} vectors x {DIM} ==")
    store = registry().vector_store(f"chroma:///{folder / 'ours'}")
    store.create_index("bench", DIM)

    def ours_write() -> None:
        for lo in range(0, size, 5000):
            store.upsert("bench", ids[lo : lo + 5000], data[lo : lo + 5000], meta[lo : lo + 5000])

    mine = ingest("recallstack", ours_write, size)
    client = chromadb.PersistentClient(path=str(folder / "raw"))
    # the HNSW parameters recallstack's collection gets by default (IndexConfig)
    hnsw = {"space": "cosine", "max_neighbors": 16, "ef_construction": 64}
    collection = client.create_collection("bench", configuration={"hnsw": hnsw})

    def raw_write() -> None:
        for lo in range(0, size, 5000):
            collection.add(
                ids=ids[lo : lo + 5000],
                embeddings=data[lo : lo + 5000],
                metadatas=meta[lo : lo + 5000],
            )

    theirs = ingest("raw chromadb", raw_write, size)
    print(f"    ratio of times {theirs / mine:.2f}x")
    compare(
        "unfiltered",
        lambda i: store.query("bench", probes[i], 10),
        lambda i: collection.query(query_embeddings=[probes[i]], n_results=10),
        queries,
    )
    compare(
        "resource_id filter 1%",
        lambda i: store.query("bench", probes[i], 10, filter={"resource_id": "r7"}),
        lambda i: collection.query(
            query_embeddings=[probes[i]], n_results=10, where={"resource_id": "r7"}
        ),
        queries,
    )


def run(size: int, queries: int, folder: Path) -> None:
    data, probes = clustered(size, queries)
    meta = [{"resource_id": f"r{i % RESOURCES}", "thread_id": f"t{i % 1000}"} for i in range(size)]
    ids = [f"m{i}" for i in range(size)]
    print(f"\n== Qdrant Edge, {size:,} vectors x {DIM} ==")

    store = registry().vector_store(f"qdrant+edge:///{folder / 'ours'}")
    store.create_index("bench", DIM)
    start = time.perf_counter()
    for lo in range(0, size, 5000):
        store.upsert("bench", ids[lo : lo + 5000], data[lo : lo + 5000], meta[lo : lo + 5000])
    ours_ingest = size / (time.perf_counter() - start)

    raw_dir = folder / "raw"
    raw_dir.mkdir()
    shard = q.EdgeShard.create(
        str(raw_dir),
        q.EdgeConfig(
            vectors={"v": q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine)},
            # the HNSW parameters recallstack's index gets by default (IndexConfig)
            hnsw_config=q.HnswIndexConfig(m=16, ef_construct=64, full_scan_threshold=10_000),
        ),
    )
    shard.update(q.UpdateOperation.create_field_index("resource_id", q.PayloadSchemaType.Keyword))
    start = time.perf_counter()
    for lo in range(0, size, 512):
        shard.update(
            q.UpdateOperation.upsert_points(
                [
                    q.Point(id=str(uuid.uuid4()), vector={"v": data[i].tolist()}, payload=meta[i])
                    for i in range(lo, min(size, lo + 512))
                ]
            )
        )
    raw_ingest = size / (time.perf_counter() - start)
    print(
        f"ingest: recallstack {ours_ingest:,.0f} /s, raw {raw_ingest:,.0f} /s "
        f"(ratio of times {raw_ingest / ours_ingest:.2f}x)"
    )
    # Edge builds its HNSW index only when optimize() is called; recallstack calls it
    # on the first search after writes, so that search is timed here as the build
    start = time.perf_counter()
    store.query("bench", probes[0], 10)
    ours_build = time.perf_counter() - start
    start = time.perf_counter()
    shard.optimize()
    print(f"index build: recallstack {ours_build:.1f} s, raw {time.perf_counter() - start:.1f} s")

    flt = q.Filter(must=[q.FieldCondition("resource_id", match=q.MatchValue("r7"))])

    def raw_query(i: int, with_filter: bool) -> Any:
        return shard.query(
            q.QueryRequest(
                limit=10,
                query=q.Query.Nearest(probes[i].tolist(), using="v"),
                filter=flt if with_filter else None,
                with_payload=True,
            )
        )

    raw: dict[str, float] = {}
    for setting in ("Edge's default search threads", "one search thread, as recallstack"):
        if raw:  # the same shard, reopened with recallstack's search setting
            shard.close()
            shard = q.EdgeShard.load(
                str(raw_dir),
                q.EdgeConfig(
                    vectors={"v": q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine)},
                    max_search_threads=1,
                ),
            )
        for label, where in (("unfiltered", None), ("resource_id filter 1%", "r7")):
            print(f"query, {label}: raw qdrant_edge, {setting}")
            raw[setting + label] = timed(lambda i, w=where: raw_query(i, w is not None), queries)
    for label, where in (("unfiltered", None), ("resource_id filter 1%", {"resource_id": "r7"})):
        print(f"query, {label}: recallstack")
        ours = timed(
            lambda i, where=where: store.query("bench", probes[i], 10, filter=where), queries
        )
        for setting in raw:
            if setting.endswith(label):
                print(f"    ratio to raw, {setting[: -len(label)]}: {ours / raw[setting]:.2f}x")
    store.close()
    shard.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--only", choices=["qdrant", "chroma"])
    args = parser.parse_args()
    for size in args.sizes:
        for name, bench in (("qdrant", run), ("chroma", run_chroma)):
            if args.only in (None, name):
                with tempfile.TemporaryDirectory() as tmp:
                    bench(size, args.queries, Path(tmp))


if __name__ == "__main__":
    main()
