"""Qdrant Edge and Chroma (in process) through recallstack, against their raw APIs.

    python bench/qdrant_chroma.py [--sizes 10000 100000] [--queries 200] [--only qdrant|chroma]

For each size: N 384-d vectors (clustered like text embeddings) with
resource_id / thread_id metadata, 100 resources so a resource filter selects
1%. The same records go into a second shard or collection through the raw
API, doing what recallstack's call does:
- Edge: the caller's ids as UUIDv5 (Edge takes no string ids), kept in the
  payload beside the metadata, both scope keys indexed, the same vector
  config; each hit's payload and score are read, as Edge converts a payload
  to Python only when it is read. A second raw writer stores less (random
  ids, the metadata only, one index), for reference.
- Chroma: `upsert`, of the plain metadata.
Prints ingest vectors/s and query p50/p95 with and without the filter for
both, and their ratio. Writes go round in batches of 1,000 and queries in
blocks of the same probes, in an order shuffled each time, so drift on this
shared machine falls on all alike.

Edge queries go to copies of recallstack's own shard, opened raw, so that
all answer from the same segments and HNSW graph. recallstack searches on
one thread (`search_threads=1`), so raw Edge is timed twice: with Edge's
default search pool, as a raw user gets it, and with one search thread, the
same setting.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as q
from timing import compare, elapsed, ingest_rates, show_rates, timed
from workload import DIM, PARTITION, clustered, scopes, upsert_partitioned

from recallstack.core.runtime.registry import registry
from recallstack.core.vectors import EVERYWHERE, Reach

CASES: list[tuple[str, Reach, dict[str, str] | None]] = [
    ("unfiltered", EVERYWHERE, None),
    ("resource partition 1%", PARTITION, {"resource_id": "r7"}),
]
"""Each query: recallstack's partition, and the raw driver's filter on the same records."""


def run_chroma(size: int, queries: int, folder: Path) -> None:
    import chromadb

    data, probes = clustered(size, queries)
    meta = scopes(0, size)
    ids = [f"m{i}" for i in range(size)]
    print(f"\n== Chroma in process, {size:,} vectors x {DIM} ==")
    store = registry().vector_store(f"chroma:///{folder / 'ours'}")
    store.create_index("bench", DIM)

    client = chromadb.PersistentClient(path=str(folder / "raw"))
    # the HNSW parameters recallstack's collection gets by default (IndexConfig)
    hnsw = {"space": "cosine", "max_neighbors": 16, "ef_construction": 64}
    collection = client.create_collection("bench", configuration={"hnsw": hnsw})
    show_rates(
        ingest_rates(
            {
                "recallstack": lambda lo, hi: upsert_partitioned(
                    store, "bench", ids[lo:hi], data[lo:hi], lo
                ),
                # upsert, as recallstack's is: insert, or overwrite by id
                "raw chromadb": lambda lo, hi: collection.upsert(
                    ids=ids[lo:hi], embeddings=data[lo:hi], metadatas=meta[lo:hi]
                ),
            },
            size,
        )
    )
    for label, partition, where in CASES:
        compare(
            label,
            timed(
                lambda i, partition=partition: store.query(
                    "bench", probes[i], 10, partition=partition
                )
            ),
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
        vectors=q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine),
        # the HNSW parameters recallstack's index gets by default (IndexConfig)
        hnsw_config=q.HnswIndexConfig(m=16, ef_construct=64, full_scan_threshold=10_000),
        max_search_threads=threads,
    )


def raw_shard(folder: Path, indexed: tuple[str, ...]) -> Any:
    folder.mkdir()
    shard = q.EdgeShard.create(str(folder), edge_config())
    for key in indexed:
        shard.update(q.UpdateOperation.create_field_index(key, q.PayloadSchemaType.Keyword))
    return shard


def in_chunks(shard: Any, rows: range, points: Callable[[range], list[Any]]) -> None:
    """Write `rows` to a raw shard in updates of 512 points, as recallstack sends them."""
    for start in range(rows.start, rows.stop, 512):
        chunk = range(start, min(rows.stop, start + 512))
        shard.update(q.UpdateOperation.upsert_points(points(chunk)))


def run(size: int, queries: int, folder: Path) -> None:
    data, probes = clustered(size, queries)
    meta = scopes(0, size)
    ids = [f"m{i}" for i in range(size)]
    print(f"\n== Qdrant Edge, {size:,} vectors x {DIM} ==")

    store = registry().vector_store(f"qdrant+edge:///{folder / 'ours'}")
    store.create_index("bench", DIM)
    shard = raw_shard(folder / "raw", ("resource_id", "thread_id"))
    minimal = raw_shard(folder / "minimal", ("resource_id",))

    def raw_write(lo: int, hi: int) -> None:
        # the same records: the caller's ids (UUIDv5, as Qdrant takes no string ids,
        # and kept in the payload to be read back), the metadata, both scope keys indexed
        in_chunks(
            shard,
            range(lo, hi),
            lambda rows: [
                q.Point(
                    id=uuid.uuid5(uuid.NAMESPACE_URL, ids[i]),
                    vector=data[i].tolist(),
                    payload={"id": ids[i], **meta[i]},
                )
                for i in rows
            ],
        )

    def minimal_write(lo: int, hi: int) -> None:
        # less than recallstack must store: random ids, so the caller's are lost
        in_chunks(
            minimal,
            range(lo, hi),
            lambda rows: [
                q.Point(id=uuid.uuid4(), vector=data[i].tolist(), payload=meta[i]) for i in rows
            ],
        )

    rates = ingest_rates(
        {
            "recallstack": lambda lo, hi: upsert_partitioned(
                store, "bench", ids[lo:hi], data[lo:hi], lo
            ),
            "raw Edge, the same records": raw_write,
            "raw Edge, random ids, metadata only": minimal_write,
        },
        size,
    )
    minimal.close()
    show_rates(rates)
    # Edge builds its HNSW index only when optimize() is called; recallstack calls it
    # on the first search after writes, so that search is timed here as the build
    ours_build = elapsed(lambda: store.query("bench", probes[0], 10, partition=EVERYWHERE))
    raw_build = elapsed(shard.optimize)
    print(f"index build: recallstack {ours_build:.1f} s, raw {raw_build:.1f} s")
    shard.close()
    # queries: raw Edge on copies of recallstack's own shard, so all answer from the same
    # segments and HNSW graph (two builds of the same data differ by up to 0.1 ms a query)
    store.close()
    (built,) = [path for path in (folder / "ours").iterdir() if path.is_dir()]
    shards = {}
    for label, threads in (("its default search pool", 0), ("one search thread", 1)):
        copy = shutil.copytree(built, folder / f"query-{threads}")
        shards[f"raw Edge, {label}"] = q.EdgeShard.load(str(copy), edge_config(threads))
    store = registry().vector_store(f"qdrant+edge:///{folder / 'ours'}")

    def raw_query(shard: Any, i: int, where: str | None) -> Any:
        flt = None
        if where is not None:
            flt = q.Filter(must=[q.FieldCondition("resource_id", match=q.MatchValue(where))])
        hits = shard.query(
            q.QueryRequest(
                limit=10,
                query=q.Query.Nearest(probes[i].tolist()),
                filter=flt,
                with_payload=True,
            )
        )
        # what recallstack hands back, read: Edge converts a hit's payload to Python only
        # when it is read, and the caller's id is in it
        return [(hit.payload, hit.score) for hit in hits]

    for label, partition, where in CASES:
        value = None if where is None else where["resource_id"]
        compare(
            label,
            timed(
                lambda i, partition=partition: store.query(
                    "bench", probes[i], 10, partition=partition
                )
            ),
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
