"""Reciprocal rank fusion of hybrid recall's signals: a pure function of the rankings."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from recallstack.core.runtime.config import Fusion


def fuse(
    fusion: Fusion,
    candidates: Collection[str],
    dense: Sequence[str],
    keyword: Sequence[str],
    context: Sequence[str] = (),
    before: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Each candidate's fused score: every signal adds its weight / (rrf_k + rank).

    `dense`, `keyword` and `context` are message ids, best first. The semantic
    weight is split between the messages' own vectors and, when there are any,
    their contextual ones (`context_share`); a contextual hit credits part of
    its weight (`context_credit`) to the message just before it (`before`), the
    context that made it match. The keyword signal has the rest of the weight.
    Only `candidates` are scored, and ranked: an id that is not one is dropped
    from its signal's ranking before ranks are counted.
    """
    before = before or {}
    dense, keyword, context = (
        [i for i in ranking if i in candidates] for ranking in (dense, keyword, context)
    )
    share = fusion.context_share if context else 0.0
    semantic = fusion.weight * (1 - share)
    contextual = fusion.weight * share * (1 - fusion.context_credit)
    credit = fusion.weight * share * fusion.context_credit
    scores: dict[str, float] = dict.fromkeys(candidates, 0.0)

    for rank, i in enumerate(dense, start=1):
        scores[i] += semantic / (fusion.rrf_k + rank)
    for rank, i in enumerate(context, start=1):
        scores[i] += contextual / (fusion.rrf_k + rank)
        if (previous := before.get(i)) in scores:
            scores[previous] += credit / (fusion.rrf_k + rank)
    for rank, i in enumerate(keyword, start=1):
        scores[i] += (1 - fusion.weight) / (fusion.rrf_k + rank)
    return scores
