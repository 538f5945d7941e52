"""Qdrant Edge through recallstack, against the raw `qdrant_edge` API.

    python bench/qdrant_vectors.py [--sizes 10000 100000] [--queries 200]

For each size: N 384-d vectors (clustered like text embeddings) with
resource_id / thread_id metadata, 100 resources so a resource filter selects
1%. The same points go into a second shard through the raw API, with a plain
payload and a keyword index on resource_id. Prints ingest vectors/s and query
p50/p95 with and without the filter for both, and their ratio.
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


def run(size: int, queries: int, folder: Path) -> None:
    data, probes = clustered(size, queries)
    meta = [{"resource_id": f"r{i % RESOURCES}", "thread_id": f"t{i % 1000}"} for i in range(size)]
    ids = [f"m{i}" for i in range(size)]
    print(f"\n== {size:,} vectors x {DIM} ==")

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
        q.EdgeConfig(vectors={"v": q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine)}),
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

    for label, where in (("unfiltered", None), ("resource_id filter 1%", {"resource_id": "r7"})):
        print(f"query, {label}: recallstack")
        ours = timed(
            lambda i, where=where: store.query("bench", probes[i], 10, filter=where), queries
        )
        print(f"query, {label}: raw qdrant_edge")
        raw = timed(lambda i, where=where: raw_query(i, where is not None), queries)
        print(f"    ratio {ours / raw:.2f}x")
    store.close()
    shard.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run(size, args.queries, Path(tmp))


if __name__ == "__main__":
    main()
