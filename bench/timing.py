"""How the vector benches time writes and queries: interleaved, in an order shuffled each time."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any


def elapsed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def timed(call: Callable[[int], Any]) -> Callable[[int], float]:
    """`call(probe)` made to return the seconds it took."""
    return lambda i: elapsed(lambda: call(i))


def in_blocks(
    variants: dict[str, Callable[[int], float]], n: int, block: int = 20, passes: int = 5
) -> dict[str, list[float]]:
    """Seconds per call of each variant over probes 0..n-1, after a warm-up.

    Probes go in blocks of `block`; every variant runs the same block, in an
    order shuffled per block, so drift and ordering effects fall on all alike:
    on 2 cores they move p50 by up to 10%, as much as the overheads measured.
    """
    rng = random.Random(0)
    samples: dict[str, list[float]] = {label: [] for label in variants}
    for i in range(min(n, block)):
        for fn in variants.values():
            fn(i)
    for _ in range(passes):
        for lo in range(0, n, block):
            order = list(variants.items())
            rng.shuffle(order)
            for label, fn in order:
                samples[label] += [fn(i) for i in range(lo, min(n, lo + block))]
    return samples


def ingest_rates(
    writers: dict[str, Callable[[int, int], Any]], size: int, batch: int = 1000
) -> dict[str, float]:
    """Vectors per second of each writer, `writer(lo, hi)` loading rows lo..hi-1.

    Batches go round in an order shuffled per batch, as queries do in
    `in_blocks`: one writer after the other moved the ratios by 0.2x here, and
    with batches of 5,000 Chroma's ratio at 10,000 vectors still ranged from
    1.07x to 1.50x between runs.
    """
    rng = random.Random(0)
    seconds = dict.fromkeys(writers, 0.0)
    for lo in range(0, size, batch):
        order = list(writers.items())
        rng.shuffle(order)
        hi = min(size, lo + batch)
        for label, write in order:
            seconds[label] += elapsed(lambda write=write, lo=lo, hi=hi: write(lo, hi))
    return {label: size / spent for label, spent in seconds.items()}


def show_rates(rates: dict[str, float]) -> None:
    """Print each writer's rate, and each raw writer's against recallstack's."""
    mine = rates["recallstack"]
    print(f"{'ingest: recallstack':42s} {mine:10,.0f} vectors/s")
    for label, rate in rates.items():
        if label != "recallstack":
            print(f"    {label:38s} {rate:10,.0f} vectors/s, ratio of times {rate / mine:.2f}x")


def p50_p95(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]


def show(label: str, samples: list[float]) -> float:
    """Print p50 and p95 in ms; return p50."""
    p50, p95 = p50_p95(samples)
    print(f"{label:42s} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    return p50


def compare(
    label: str,
    ours: Callable[[int], float],
    raws: dict[str, Callable[[int], float]],
    n: int,
) -> None:
    """Time recallstack and each raw variant (seconds per probe) in blocks; print the ratios."""
    samples = in_blocks({"recallstack": ours, **raws}, n)
    mine = show(f"query, {label}: recallstack", samples["recallstack"])
    for name in raws:
        theirs = show(f"    {name}", samples[name])
        print(f"{'      ratio recallstack / that':42s} {mine / theirs:10.2f}x")
