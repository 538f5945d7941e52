"""Reindexing: every message not yet recorded under a memory's indexes, indexed now (after a
crash, a new embedder, contextual vectors turned on, a failure that `save` reported)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from recallstack.core.messages import Message
from recallstack.core.recall import SemanticRecall
from recallstack.core.recall.derived import followers
from recallstack.core.runtime.config import SemanticRecallConfig


@dataclass(frozen=True)
class ReindexResult:
    """How many messages were indexed and failed; the failures' ids and first error."""

    indexed: int
    failed: int
    error: str | None = None
    failed_ids: list[str] = field(default_factory=list)


def reindex(
    semantic: SemanticRecall,
    config: SemanticRecallConfig,
    batch_size: int,
    progress: Callable[[int, int], None] | None,
) -> ReindexResult:
    """Index every message not yet indexed under `config`'s indexes, oldest first: a
    batch at a time, a failed batch again message by message (`Memory.reindex`)."""
    # a message is recorded in the contextual index only once it is in the plain one,
    # so the contextual index's unindexed messages include the plain one's
    name = semantic.context_index_name(config) or semantic.index_name(config)
    total = semantic.storage.count_unindexed(name) if progress is not None else 0
    done = 0
    failed: list[str] = []
    error: str | None = None
    cursor: Message | None = None
    while batch := semantic.storage.unindexed(name, limit=batch_size, after=cursor):
        cursor = batch[-1]
        # a message saved but not yet indexed may have changed its followers' context
        following = followers(semantic.storage, [m.id for m in batch], config.context)
        # those not yet recorded count here: once indexed, the cursor passes them by
        waiting = {m.id for m in following} - semantic.storage.recorded(
            [m.id for m in following], name
        )
        report = semantic.indexing.index([*batch, *following], config)
        asked = {m.id for m in batch}
        done += len((asked | waiting).intersection(report.indexed))
        failed += [i for i in report.refused if i in asked]
        error = error or report.error
        retry = asked.intersection(report.failed) - set(report.refused)
        singles = []
        for m in batch:
            if m.id in retry:
                singles.append(semantic.indexing.index([m], config))
        done += sum(len(r.indexed) for r in singles)
        failed += [i for r in singles for i in r.failed]
        if progress is not None:
            progress(done + len(failed), total)
        if singles and all(r.failed and not r.refused for r in singles):
            break
    return ReindexResult(done, len(failed), error, failed)
