"""MongoDB (exact path) through recallstack, against the same work in raw pymongo.

    python bench/mongo_vectors.py [--url mongomock://bench] [--sizes 10000] [--queries 200]

No MongoDB server runs on the project's machines, so by default both sides
run on mongomock, the in-process STAND-IN: the figures describe recallstack's
overhead over the driver calls it makes, not MongoDB's speed. Give `--url` a
real deployment (`mongodb://...`) to measure one.

For each size: N 384-d vectors (clustered like text embeddings) with
resource_id / thread_id metadata, 100 resources so a resource filter selects
1%. recallstack loads them with `upsert`; the raw writer inserts the same
documents (id, BSON float32 vector, metadata) with `insert_many` into a
collection with the same scope indexes. Queries: recallstack's `query`, and
raw pymongo doing what a user would write by hand for exact search: find the
documents (all, or the resource's), decode the vectors with numpy, take the
top 10 by cosine, and return their metadata. Prints ingest vectors/s and query
p50/p95 with and without the filter, and the ratios.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from timing import compare, ingest_rates, show_rates, timed
from workload import DIM, PARTITION, clustered, scopes, upsert_partitioned

from recallstack.adapters.mongo.documents import vector_binary, vector_rows
from recallstack.adapters.mongo.vector import MongoVectorStore
from recallstack.core.vectors import EVERYWHERE, Reach


def run(url: str, size: int, queries: int) -> None:
    data, probes = clustered(size, queries)
    metadata = scopes(0, size)
    store = MongoVectorStore(url, search="exact")
    name = f"bench_{size}"
    store.create_index(name, DIM)
    raw = store.db[f"raw_{size}"]
    raw.create_index("m.resource_id")
    raw.create_index("m.thread_id")
    stand_in = " (mongomock STAND-IN)" if store.connection.stand_in else ""
    print(f"\n== MongoDB exact path{stand_in}, {size:,} vectors x {DIM} ==")

    def ours(lo: int, hi: int) -> None:
        upsert_partitioned(store, name, [f"m{i}" for i in range(lo, hi)], data[lo:hi], lo)

    def theirs(lo: int, hi: int) -> None:
        raw.insert_many(
            [{"_id": f"m{i}", "v": vector_binary(data[i]), "m": metadata[i]} for i in range(lo, hi)]
        )

    show_rates(ingest_rates({"recallstack": ours, "raw pymongo insert_many": theirs}, size))

    def by_hand(query: dict[str, Any], probe: np.ndarray) -> list[tuple[str, float, Any]]:
        found = list(raw.find(query, {"v": 1, "m": 1}))
        scores = vector_rows([d["v"] for d in found], DIM) @ probe
        top = np.argpartition(-scores, min(10, len(found) - 1))[:10]
        top = top[np.argsort(-scores[top])]
        return [(found[n]["_id"], float(scores[n]), found[n]["m"]) for n in top]

    within: list[tuple[str, Reach, dict[str, Any]]] = [
        ("unfiltered", EVERYWHERE, {}),
        ("resource partition 1%", PARTITION, {"m.resource_id": "r7"}),
    ]
    for label, partition, query in within:
        compare(
            label,
            timed(
                lambda i, partition=partition: store.query(name, probes[i], 10, partition=partition)
            ),
            {"raw pymongo + numpy": timed(lambda i, query=query: by_hand(query, probes[i]))},
            queries,
        )
    store.delete_index(name)
    raw.drop()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="mongomock://bench/bench")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    for size in args.sizes:
        run(args.url, size, args.queries)


if __name__ == "__main__":
    main()
