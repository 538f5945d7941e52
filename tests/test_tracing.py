"""Traces (`core/runtime/tracing.py`): the spans a save, a recall and a search make, read from
the OpenTelemetry SDK's in-memory exporter; and nothing at all without the `otel` extra."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.api.memory import Memory
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.runtime.tracing import CONTENT_ENV
from recallstack.embedders.hashing import HashEmbedder

T0 = datetime(2024, 3, 1, tzinfo=UTC)
EMBEDDER = HashEmbedder(256)
HYBRID = {"last_messages": 2, "semantic_recall": {"top_k": 3, "hybrid": {"context": 1}}}
TEXTS = [
    "my sister Ada moved to Lisbon last spring",
    "the ferry to Cacilhas leaves every twenty minutes",
    "we ate grilled sardines near the river",
    "the tram 28 climbs to the castle",
    "my laptop battery died on the train",
    "Ada recommended a bakery in Belem",
]

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> None:
    """The SDK, as an application would configure it (once per process)."""
    given = TracerProvider()
    given.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(given)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


@pytest.fixture(params=["memory", "libsql"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    url = "memory://" if request.param == "memory" else f"libsql:///{tmp_path / 'm.db'}"
    with Memory(url, url, EMBEDDER, HYBRID) as opened:
        opened.create_thread("ada", thread_id="lisbon")
        opened.create_thread("ada", thread_id="today")
        opened.save_messages([message(i, text) for i, text in enumerate(TEXTS)])
        yield opened


def message(i: int, text: str, thread: str = "lisbon") -> Message:
    return Message(
        id=f"m{i}", thread_id=thread, role="user", content=text, created_at=T0 + timedelta(hours=i)
    )


def named(found: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in found.get_finished_spans() if s.name == f"recallstack.{name}"]


def children(found: InMemorySpanExporter, parent: ReadableSpan) -> list[str]:
    return [
        s.name.removeprefix("recallstack.")
        for s in found.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return {k.removeprefix("recallstack."): v for k, v in (span.attributes or {}).items()}


def test_a_recall_span_shows_the_hits_their_signals_and_each_stage(
    memory: Memory, spans: InMemorySpanExporter
) -> None:
    result = memory.recall("today", "ada", "where does Ada live now, Lisbon?")
    assert result.hits
    (recall,) = named(spans, "recall")
    seen = attributes(recall)
    assert seen["thread_id"] == "today" and seen["resource_id"] == "ada"
    assert seen["top_k"] == 3 and seen["hybrid"] is True and seen["scope"] == "resource"
    assert seen["hits"] == len(result.hits)
    assert seen["context_messages"] == len(result.context)
    assert seen["recalled_messages"] == len(result.messages) - seen["history_messages"]
    events = [dict(e.attributes or {}) for e in recall.events if e.name == "recallstack.hit"]
    assert [e["recallstack.message_id"] for e in events] == [h.message_id for h in result.hits]
    for event, hit in zip(events, result.hits, strict=True):
        assert event["recallstack.score"] == pytest.approx(hit.score)
        assert event.get("recallstack.semantic_score") == hit.dense_score
        assert event.get("recallstack.keyword_score") == hit.keyword_score
        assert event.get("recallstack.context_score") == hit.context_score
        assert event.get("recallstack.semantic_rank") == hit.dense_rank
        assert event.get("recallstack.keyword_rank") == hit.keyword_rank
    stages = children(spans, recall)
    for stage in ("history", "embed", "vector.query", "keyword.query", "neighbours"):
        assert stage in stages, stages
    assert stages.count("vector.query") == 2  # the plain index and the contextual one
    for span in [recall, *spans.get_finished_spans()]:
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time >= span.start_time  # each stage's timing
    (neighbours,) = named(spans, "neighbours")
    assert attributes(neighbours)["hits"] == len(result.hits)
    (keywords,) = named(spans, "keyword.query")
    assert attributes(keywords)["results"] >= 1


def test_a_save_span_counts_what_was_written(memory: Memory, spans: InMemorySpanExporter) -> None:
    memory.save_messages([message(10, "a new note about the castle", "today")])
    (save,) = named(spans, "save")
    seen = attributes(save)
    assert seen["messages"] == 1 and seen["saved"] == 1 and seen["indexed"] == 1
    assert seen["thread_ids"] == ("today",) and seen["resource_ids"] == ("ada",)
    stages = children(spans, save)
    assert "storage.write" in stages and "index" in stages
    (index,) = named(spans, "index")
    assert {"embed", "vector.upsert", "ledger.write"} <= set(children(spans, index))


def test_a_search_span_and_no_text_unless_asked(
    memory: Memory, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "sardines by the river"
    hits = memory.search("ada", query, top_k=2)
    (search,) = named(spans, "search")
    assert attributes(search)["hits"] == len(hits) == 2
    recorded = repr(
        [(s.attributes, [e.attributes for e in s.events]) for s in spans.get_finished_spans()]
    )
    assert "sardines" not in recorded and "query" not in attributes(search)

    spans.clear()
    monkeypatch.setenv(CONTENT_ENV, "1")
    memory.search("ada", query, top_k=2)
    (search,) = named(spans, "search")
    assert attributes(search)["query"] == query
    contents = [e.attributes["recallstack.content"] for e in search.events]  # type: ignore[index]
    assert contents[0] == hits[0].message.text


def test_a_refused_recall_is_an_error_span(memory: Memory, spans: InMemorySpanExporter) -> None:
    with pytest.raises(InvalidInputError):
        memory.recall("lisbon", "bob", "anything")  # another resource's thread
    (recall,) = named(spans, "recall")
    assert recall.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in recall.events)


def test_async_spans_nest_under_the_callers_span(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """AsyncMemory runs the operations in a greenlet: the caller's span stays the parent."""
    url = f"libsql:///{tmp_path / 'a.db'}"

    async def run() -> None:
        async with AsyncMemory(url, url, EMBEDDER, HYBRID) as memory:
            await memory.create_thread("ada", thread_id="lisbon")
            await memory.save_messages([message(i, t) for i, t in enumerate(TEXTS)])
            tracer = trace.get_tracer("the application")
            with tracer.start_as_current_span("agent turn"):
                await asyncio.gather(
                    *(memory.recall("lisbon", "ada", f"Ada {n}") for n in range(3))
                )

    asyncio.run(run())
    (turn,) = [s for s in spans.get_finished_spans() if s.name == "agent turn"]
    recalls = named(spans, "recall")
    assert len(recalls) == 3
    assert all(r.parent is not None and r.parent.span_id == turn.context.span_id for r in recalls)
    for r in recalls:
        assert "vector.query" in children(spans, r)


def test_without_the_extra_a_span_is_one_shared_no_op(tmp_path: Path) -> None:
    """With opentelemetry not importable, recall works and `span` does nothing."""
    script = """
import sys
class NoOtel:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(name)
sys.meta_path.insert(0, NoOtel())
from recallstack.core.runtime import tracing
from recallstack import Memory, Message
from recallstack.embedders.hashing import HashEmbedder
assert tracing.trace is None
assert tracing.span("recall", thread_id="t") is tracing.span("save")
with Memory("memory://", "memory://", HashEmbedder(64), {"semantic_recall": True}) as m:
    m.create_thread("ada", thread_id="t")
    m.save_messages([Message(thread_id="t", role="user", content="hello there")])
    print(len(m.recall("t", "ada", "hello").hits))
print("opentelemetry" in " ".join(sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False"]


def test_with_the_api_but_no_sdk_no_span_is_made_until_one_is_set() -> None:
    """The API alone (no tracer provider set) records nothing, so recallstack makes no
    span; a provider set later is used from then on."""
    script = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from recallstack.core.runtime import tracing
assert tracing.trace is not None
assert tracing.span("recall") is tracing.span("save")
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with tracing.span("recall", thread_id="t") as current:
    assert current is not None
print([s.name for s in exporter.get_finished_spans()])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['recallstack.recall']"
