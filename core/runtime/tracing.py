"""Traces: every save, recall and search is an OpenTelemetry span, with a child span for
each stage (embed, vector query, keyword query, neighbour windows, storage writes).

Spans go through OpenTelemetry's API when the `otel` extra is installed; the
application's SDK decides where they go (docs/tracing.md). Without the extra,
`span` hands back one shared no-op and nothing else runs. Message text is
recorded only with `RECALLSTACK_TRACE_CONTENT=1`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

try:
    from opentelemetry import trace
except ImportError:  # the extra is not installed: spans cost nothing
    trace = None  # type: ignore[assignment]

P = ParamSpec("P")
R = TypeVar("R")

CONTENT_ENV = "RECALLSTACK_TRACE_CONTENT"
"""Set to 1 to record the query and the recalled messages' text in spans."""

_NOTHING: AbstractContextManager[None] = nullcontext()


def span(name: str, **attributes: Any) -> AbstractContextManager[Span | None]:
    """A span named `recallstack.<name>`, current while the block runs. The block gets
    it only when it records, so that what only a trace needs is worked out only then;
    `attributes` whose value is None are left out. Until the application sets a tracer
    provider (an SDK), no span is made at all: none would be recorded."""
    if trace is None:
        return _NOTHING
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return _NOTHING
    return _recorded(provider, name, attributes)


def traced(name: str, record: Callable[..., None]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a method in a span `recallstack.<name>`; on a recording span, `record(span,
    result, *args, **kwargs)` adds what the call did."""

    def wrap(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with span(name) as current:
                result = method(*args, **kwargs)
                if current is not None:
                    record(current, result, *args, **kwargs)
                return result

        return run

    return wrap


_tracer: tuple[TracerProvider, Tracer] | None = None
"""The last provider's tracer: asking a provider for it each time costs a span's worth."""


@contextmanager
def _recorded(
    provider: TracerProvider, name: str, attributes: Mapping[str, Any]
) -> Iterator[Span | None]:
    global _tracer
    if _tracer is None or _tracer[0] is not provider:
        _tracer = (provider, provider.get_tracer("recallstack"))
    given = {f"recallstack.{k}": v for k, v in attributes.items() if v is not None}
    with _tracer[1].start_as_current_span(f"recallstack.{name}", attributes=given) as current:
        yield current if current.is_recording() else None


def note(current: Span | None, **attributes: Any) -> None:
    """Add attributes (`recallstack.<key>`) to a recording span; None values are left out."""
    if current is not None:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(f"recallstack.{key}", value)


def with_content() -> bool:
    """Whether spans may carry message text (`RECALLSTACK_TRACE_CONTENT`)."""
    return os.environ.get(CONTENT_ENV, "").lower() in ("1", "true", "yes")


def note_hits(current: Span | None, hits: Sequence[Any], texts: Mapping[str, str]) -> None:
    """One `recallstack.hit` event per hit, best first: its id, thread, rank and each
    signal's score and rank (those it has); its text with `with_content()`."""
    if current is None:
        return
    current.set_attribute("recallstack.hits", len(hits))
    for rank, hit in enumerate(hits, 1):
        fields = {
            "message_id": hit.message_id,
            "thread_id": hit.thread_id,
            "rank": rank,
            "score": hit.score,
            "semantic_score": hit.dense_score,
            "semantic_rank": hit.dense_rank,
            "keyword_score": hit.keyword_score,
            "keyword_rank": hit.keyword_rank,
            "context_score": hit.context_score,
            "context_rank": hit.context_rank,
        }
        if with_content() and hit.message_id in texts:
            fields["content"] = texts[hit.message_id]
        event = {f"recallstack.{k}": v for k, v in fields.items() if v is not None}
        current.add_event("recallstack.hit", event)
