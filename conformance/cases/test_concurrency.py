"""Group 9: concurrent upserts and queries lose nothing and stay consistent."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from recallstack.conformance.dataset import vectors
from recallstack.conformance.twin import Twin
from recallstack.core.vectors import EVERYWHERE

WORKERS = 4
PER_WORKER = 50


def test_concurrent_upserts_and_queries(twin: Twin) -> None:
    name = twin.index(8)
    data = vectors(WORKERS * PER_WORKER, 8, seed=31)

    def write(worker: int) -> int:
        for i in range(PER_WORKER):
            row = worker * PER_WORKER + i
            twin.store.upsert(
                name,
                [f"w{row:04d}"],
                data[row : row + 1],
                [{"worker": worker}],
                partition=EVERYWHERE,
            )
            if i % 10 == 0:
                twin.store.query(
                    name, data[row], 5, filter={"worker": worker}, partition=EVERYWHERE
                )
        return worker

    with ThreadPoolExecutor(WORKERS) as pool:
        assert sorted(pool.map(write, range(WORKERS))) == list(range(WORKERS))
    twin.store.wait_until_consistent(name)
    assert twin.store.describe_index(name).count == WORKERS * PER_WORKER
    for worker in range(WORKERS):
        hits = twin.store.query(
            name, data[0], 1000, filter={"worker": worker}, partition=EVERYWHERE
        )
        assert len(hits) == PER_WORKER
