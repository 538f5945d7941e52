"""What the span of each memory operation records (`core/runtime/tracing.py`, docs/tracing.md):
called with the span, the operation's result and its arguments, only while a span records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from recallstack.core.messages import Message
from recallstack.core.runtime.tracing import note, note_hits, with_content

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from recallstack.core.api.operations import Operations, RecallResult, SaveResult, SearchHit


def saved(
    current: Span, result: SaveResult, _: Operations, messages: Sequence[Message], *__: Any
) -> None:
    note(
        current,
        messages=len(messages),
        saved=len(result.messages),
        thread_ids=sorted({m.thread_id for m in result.messages}),
        resource_ids=sorted({m.resource_id for m in result.messages if m.resource_id}),
        indexed=len(result.indexed),
        not_indexed=len(result.not_indexed),
        error=result.error,
    )


def recalled(
    current: Span,
    result: RecallResult,
    operations: Operations,
    thread_id: str,
    resource_id: str | None,
    query: str | None,
    per_page: int | None,
    page: int,
    thread_config: Mapping[str, Any] | None,
) -> None:
    recall = operations.config.merged(thread_config).semantic_recall
    asked = bool(query and recall)
    note(
        current,
        thread_id=thread_id,
        resource_id=resource_id or next((m.resource_id for m in result.messages), None),
        query=query if asked and with_content() else None,
        top_k=recall.top_k if asked and recall else None,
        scope=recall.scope if asked and recall else None,
        threshold=recall.threshold if asked and recall else None,
        hybrid=bool(recall.hybrid) if asked and recall else None,
        history_messages=len(result.messages) - len(result.recalled_ids),
        recalled_messages=len(result.recalled_ids),
        context_messages=len(result.context),
    )
    note_hits(current, result.hits, {m.id: m.text for m in result.messages})


def searched(
    current: Span,
    result: list[SearchHit],
    _: Operations,
    resource_id: str,
    query: str,
    top_k: int | None,
    *__: Any,
) -> None:
    note(current, resource_id=resource_id, query=query if with_content() else None, top_k=top_k)
    note_hits(current, result, {h.message.id: h.message.text for h in result})
