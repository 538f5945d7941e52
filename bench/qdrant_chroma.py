"""Qdrant Edge and Chroma (in process) through recallstack, against their raw APIs.

    python bench/qdrant_chroma.py [--sizes 10000 100000] [--queries 200] [--only qdrant|chroma]

For each size: N 384-d vectors (clustered like text embeddings) with
resource_id / thread_id metadata, 100 resources so a resource filter selects
1%. The same points go, with plain metadata, into a second shard or
collection through the raw API. Prints ingest vectors/s and query p50/p95
with and without the filter for both, and their ratio. Queries run in
shuffled blocks of the same probes, every variant on each block, so drift
on this shared machine falls on all alike.

recallstack searches Edge shards on one thread (`search_threads=1`), so raw
Edge is timed twice: with Edge's default search pool, as a raw user gets it,
and on a copy of the shard opened with one search thread, the same setting.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as q
from timing import compare, timed
from workload import DIM, clustered, scopes

from recallstack.core.registry import registry

FILTER = {"resource_id": "r7"}


def ingest(label: str, write: Callable[[], None], size: int) -> float:
    start = time.perf_counter()
    write()
    rate = size / (time.perf_counter() - start)
    print(f"ingest, {label}: {rate:,.0f} vectors/s")
    return rate


def run_chroma(size: int, queries: int, folder: Path) -> None:
    import chromadb

    data, probes = clustered(size, queries)
    meta = scopes(0, size)
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
    for label, where in (("unfiltered", None), ("resource_id filter 1%", FILTER)):
        compare(
            label,
            timed(lambda i, where=where: store.query("bench", probes[i], 10, filter=where)),
            {
                "raw chromadb": timed(
                    lambda i, where=where: collection.query(
                        query_embeddings=[probes[i]], n_results=10, where=where
                    )
                )
            },
            queries,
        )


def edge_config(threads: int | None = None) -> Any:
    return q.EdgeConfig(
        vectors={"v": q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine)},
        # the HNSW parameters recallstack's index gets by default (IndexConfig)
        hnsw_config=q.HnswIndexConfig(m=16, ef_construct=64, full_scan_threshold=10_000),
        max_search_threads=threads,
    )


def run(size: int, queries: int, folder: Path) -> None:
    data, probes = clustered(size, queries)
    meta = scopes(0, size)
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
    shard = q.EdgeShard.create(str(raw_dir), edge_config())
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
    shard.close()
    shutil.copytree(raw_dir, folder / "raw-one-thread")
    shards = {
        "raw Edge, its default search pool": q.EdgeShard.load(str(raw_dir)),
        "raw Edge, one search thread": q.EdgeShard.load(
            str(folder / "raw-one-thread"), edge_config(threads=1)
        ),
    }

    def raw_query(shard: Any, i: int, where: str | None) -> Any:
        flt = None
        if where is not None:
            flt = q.Filter(must=[q.FieldCondition("resource_id", match=q.MatchValue(where))])
        return shard.query(
            q.QueryRequest(
                limit=10,
                query=q.Query.Nearest(probes[i].tolist(), using="v"),
                filter=flt,
                with_payload=True,
            )
        )

    for label, where in (("unfiltered", None), ("resource_id filter 1%", FILTER)):
        value = None if where is None else where["resource_id"]
        compare(
            label,
            timed(lambda i, where=where: store.query("bench", probes[i], 10, filter=where)),
            {
                name: timed(lambda i, shard=shard, value=value: raw_query(shard, i, value))
                for name, shard in shards.items()
            },
            queries,
        )
    store.close()
    for shard in shards.values():
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
