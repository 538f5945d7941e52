"""What tracing costs a recall: without the `otel` extra, with OpenTelemetry's API and no
SDK (spans are no-ops), and with the SDK recording every span.

    python bench/tracing.py [--messages 10000] [--queries 400] [--hybrid]

Stores the messages of 100 users (10 a thread) in a LibSQL file with the hash
embedder (a fast model, so that what tracing adds is as large a share of a
recall as it can be), then times the same recalls under each variant,
interleaved in shuffled blocks (bench/timing.py) in one process. "Without the
extra" takes the very branch an ImportError leaves (`tracing.trace is None`);
"SDK" records through a `TracerProvider` with a batch processor whose exporter
drops the spans, as an application exporting them elsewhere would.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import types
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from timing import elapsed, in_blocks, timed

from recallstack import Memory, Message
from recallstack.core.runtime import tracing

USERS, PER_THREAD = 100, 10
T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = [
    "trip",
    "recipe",
    "bread",
    "marathon",
    "knee",
    "hotel",
    "budget",
    "kyoto",
    "sourdough",
    "interview",
    "salary",
]


class Dropped(SpanExporter):
    """Takes every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def seed(memory: Memory, count: int) -> None:
    threads = count // PER_THREAD
    for t in range(threads):
        user = f"user{t % USERS}"
        memory.create_thread(user, thread_id=f"t{t}")
    batch: list[Message] = []
    for i in range(count):
        t = i // PER_THREAD
        words = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7))
        batch.append(
            Message(
                thread_id=f"t{t}",
                role="user" if i % 2 == 0 else "assistant",
                content=f"message {i} about {words}",
                created_at=T0 + timedelta(seconds=i),
            )
        )
        if len(batch) == 500:
            memory.save_messages(batch)
            batch = []
    if batch:
        memory.save_messages(batch)


def main() -> None:
    given = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given.add_argument("--messages", type=int, default=10_000)
    given.add_argument("--queries", type=int, default=400)
    given.add_argument("--hybrid", action="store_true", help="hybrid recall (more stages)")
    args = given.parse_args()
    hybrid = {"context": 0} if args.hybrid else False  # the figures in docs/tracing.md
    recall = {"top_k": 4, "message_range": 1, "hybrid": hybrid}
    options = {"last_messages": 10, "semantic_recall": recall}
    sdk = TracerProvider()
    sdk.add_span_processor(BatchSpanProcessor(Dropped()))
    variants = {
        "without the otel extra": None,
        "otel API, no SDK": otel_trace,
        "otel SDK, recording": types.SimpleNamespace(
            get_tracer_provider=lambda: sdk, ProxyTracerProvider=otel_trace.ProxyTracerProvider
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        url = f"libsql:///{Path(tmp) / 'bench.db'}"
        with Memory(url, url, "hash/384", options) as memory:
            seed(memory, args.messages)
            threads = args.messages // PER_THREAD

            def recall_under(variant: object) -> object:
                def call(i: int) -> object:
                    tracing.trace = variant  # type: ignore[assignment]
                    query = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5) % len(WORDS)]} {i}"
                    thread = f"t{(i * 7919) % threads}"
                    return memory.recall(thread, vector_search_string=query)

                return call

            samples = in_blocks(
                {label: timed(recall_under(v)) for label, v in variants.items()}, args.queries
            )
            counted = InMemorySpanExporter()
            counter = TracerProvider()
            counter.add_span_processor(SimpleSpanProcessor(counted))
            tracing.trace = types.SimpleNamespace(  # type: ignore[assignment]
                get_tracer_provider=lambda: counter,
                ProxyTracerProvider=otel_trace.ProxyTracerProvider,
            )
            memory.recall("t0", vector_search_string="kyoto budget")
            spans = len(counted.get_finished_spans())
    sdk.shutdown()
    tracing.trace = None  # type: ignore[assignment]
    noop = min(elapsed(lambda: [_enter_noop() for _ in range(100_000)]) / 100_000 for _ in range(5))
    kind = "hybrid" if args.hybrid else "semantic"
    print(f"{args.messages:,} messages, {kind} recall, {args.queries} queries x 5 passes")
    base = statistics.median(samples["without the otel extra"])
    print(f"{'variant':<26} {'p50 ms':>8} {'p95 ms':>8} {'p50 vs none':>12}")
    for label, seconds in samples.items():
        ordered = sorted(seconds)
        p50, p95 = statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]
        print(f"{label:<26} {p50 * 1e3:8.2f} {p95 * 1e3:8.2f} {(p50 / base - 1) * 100:+11.1f}%")
    total = spans * noop
    print(
        f"a recall passes {spans} spans; without the extra each is a no-op of {noop * 1e9:.0f} ns:"
        f" {total * 1e6:.1f} µs a recall, {total / base * 100:.2f}% of its p50"
    )


def _enter_noop() -> None:
    with tracing.span("recall", thread_id="t"):
        pass


if __name__ == "__main__":
    main()
