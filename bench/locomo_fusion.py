"""Hybrid recall's fusion settings replayed on LoCoMo: R@k for each setting tried.

    python bench/locomo_fusion.py ../shared/data/locomo/locomo-dev.json [--conversations N]
        [--cross-validate]

`bench/locomo.py` measures one setting through the public API, ingesting the
whole half each time. This embeds the turns and the questions once (the
offline local model, turn text as `bench/locomo.py` writes it), ranks each
question's turns by cosine and by BM25 (`core/keywords.py`, with the
conversation's own statistics, as every backend computes them), then fuses
the two rankings as `SemanticRecall` does, for every `rrf_k`, `weight` and
`candidates` of the grid: a grid costs seconds. Then the same with
contextual vectors (`{"context": 1}`): each turn embedded after the turn
before it in its session, a third ranking, each hit crediting that turn,
for every `context_share` and `context_credit` of a second grid. Its
figures for a setting are `bench/locomo.py`'s (checked for both defaults
and the old default).

The contextual grid's `candidates` stop at 100: 300 doubled a recall's
latency for 0.4 at R@25. `--keep-stop-words` ranks by BM25 over all of a
question's words, as before English stop words were left out of queries.

`--cross-validate` asks whether choosing on this half overfits it: leaving
each conversation out in turn, it picks the grid's best setting (by mean
R@k) on the other conversations, and scores that setting and the default on
the one left out; the left-out scores are pooled over all questions.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from locomo import CATEGORIES, KS, PAPER, arguments, evidence, load, sessions, turn_text

from recallstack.core.keywords import bm25, query_terms, words
from recallstack.core.runtime.config import FUSION_DEFAULTS, Fusion
from recallstack.core.runtime.registry import registry

GRID = {"rrf_k": (5, 10, 20, 60), "weight": (0.4, 0.5, 0.6), "candidates": (100, 300)}
CONTEXT_GRID = {
    "rrf_k": (10, 12),
    "weight": (0.5, 0.6),
    "candidates": (50, 100),
    "context_share": (0.75, 0.85),
    "context_credit": (0.45, 0.55),
}
TOP = max(KS)


@dataclass(frozen=True)
class Question:
    """A question's evidence, and the conversation's turns as each signal ranks them."""

    conversation: str
    evidence: set[str]
    by_cosine: list[str]
    by_words: list[str]
    by_context: list[str]
    previous: dict[str, str]
    """Each turn's turn before it in its session: what its contextual vector holds."""


def rankings(data: list[dict[str, Any]], stop_words: bool = True) -> list[Question]:
    """Every question of categories 1-4, with its rankings; without `stop_words`, a
    question's keywords keep its stop words (as they did before 2026-12-07)."""
    embedder = registry().embedder("local/all-MiniLM-L6-v2")
    found = []
    for sample in data:
        ids: list[str] = []
        texts: list[str] = []
        contexts: list[str] = []
        previous: dict[str, str] = {}
        for _, _, session in sessions(sample["conversation"]):
            for n, turn in enumerate(session):
                ids.append(turn["dia_id"])
                texts.append(turn_text(turn))
                contexts.append("\n".join(texts[-2:]) if n else texts[-1])
                if n:
                    previous[ids[-1]] = ids[-2]
        vectors = embedder.embed(texts)
        in_context = embedder.embed(contexts)
        documents = {i: Counter(words(text)) for i, text in zip(ids, texts, strict=True)}
        questions = [qa for qa in sample["qa"] if qa.get("category") in CATEGORIES]
        asked = embedder.embed([qa["question"] for qa in questions])
        for qa, query in zip(questions, asked, strict=True):
            text = qa["question"]
            terms = query_terms(text) if stop_words else list(dict.fromkeys(words(text)))
            scores = bm25(terms, documents)
            found.append(
                Question(
                    sample["sample_id"],
                    evidence(qa),
                    by_cosine=[ids[n] for n in np.argsort(-(vectors @ query), kind="stable")],
                    by_words=sorted(scores, key=lambda i: (-scores[i], i)),
                    by_context=[ids[n] for n in np.argsort(-(in_context @ query), kind="stable")],
                    previous=previous,
                )
            )
    return found


def recall_at(
    questions: list[Question],
    rrf_k: int,
    weight: float,
    pool: int,
    context_share: float = 0.0,
    context_credit: float = 0.0,
) -> list[float]:
    """R@k over the questions, fused as SemanticRecall fuses (top_k = the largest k);
    a `context_share` adds the contextual ranking."""
    totals = [0.0] * len(KS)
    for q in questions:
        fused: defaultdict[str, float] = defaultdict(float)
        for rank, i in enumerate(q.by_cosine[: max(TOP, pool)], start=1):
            fused[i] += weight * (1 - context_share) / (rrf_k + rank)
        for rank, i in enumerate(q.by_context[: max(TOP, pool)] if context_share else [], 1):
            fused[i] += weight * context_share * (1 - context_credit) / (rrf_k + rank)
            if i in q.previous:
                fused[q.previous[i]] += weight * context_share * context_credit / (rrf_k + rank)
        for rank, i in enumerate(q.by_words[:pool], start=1):
            fused[i] += (1 - weight) / (rrf_k + rank)
        wanted = q.evidence
        ranked = sorted(fused, key=lambda i: (-fused[i], i))[:TOP]
        for n, k in enumerate(KS):
            totals[n] += len(wanted & set(ranked[:k])) / len(wanted) if wanted else 1.0
    return [100 * t / len(questions) for t in totals]


def cross_validate(questions: list[Question]) -> None:
    """Leave one conversation out: the grid's best setting on the others against the
    default, both scored on the conversation left out, pooled."""
    conversations = sorted({q.conversation for q in questions})
    for label, grid, default in (
        ("hybrid", GRID, setting(FUSION_DEFAULTS[False])[:3]),
        ("hybrid, context 1", CONTEXT_GRID, setting(FUSION_DEFAULTS[True])),
    ):
        settings = list(itertools.product(*grid.values()))
        chosen_rows, default_rows = [], []
        print(f"\n{label}: left out | chosen on the others | chosen R@k | default R@k")
        for out in conversations:
            train = [q for q in questions if q.conversation != out]
            test = [q for q in questions if q.conversation == out]
            best = max(settings, key=lambda s: sum(recall_at(train, *s)))
            chosen = recall_at(test, *best)
            kept = recall_at(test, *default)
            chosen_rows.append((len(test), chosen))
            default_rows.append((len(test), kept))
            print(f"| {out} | {best} | {_cells(chosen)} | {_cells(kept)} |")
        total = sum(n for n, _ in chosen_rows)
        for name, rows in (("chosen", chosen_rows), ("default", default_rows)):
            pooled = [sum(n * r[i] for n, r in rows) / total for i in range(len(KS))]
            print(f"| pooled, {name} | | {_cells(pooled)} |")


def setting(fusion: Fusion) -> tuple[int, float, int, float, float]:
    """`fusion` in the order `recall_at` takes it."""
    return (
        fusion.rrf_k,
        fusion.weight,
        fusion.candidates,
        fusion.context_share,
        fusion.context_credit,
    )


def _cells(figures: list[float]) -> str:
    return " / ".join(f"{x:.1f}" for x in figures)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--cross-validate", action="store_true", help="leave one conversation out")
    parser.add_argument(
        "--keep-stop-words", action="store_true", help="keywords keep the query's stop words"
    )
    args = parser.parse_args()
    questions = rankings(load(args), stop_words=not args.keep_stop_words)
    if args.cross_validate:
        cross_validate(questions)
        return
    print(f"{len(questions)} questions; R@{' / R@'.join(map(str, KS))}")
    print("| rrf_k | weight | candidates | " + " | ".join(f"R@{k}" for k in KS) + " |")
    print("|---|---|---|" + "---|" * len(KS))
    for rrf_k, weight, pool in itertools.product(*GRID.values()):
        figures = recall_at(questions, rrf_k, weight, pool)
        print(f"| {rrf_k} | {weight} | {pool} | " + " | ".join(f"{x:.1f}" for x in figures) + " |")
    for name, figures in PAPER.items():
        print(f"| {name} | | | " + " | ".join(f"{x:.1f}" for x in figures) + " |")
    print("\nwith contextual vectors, {'context': 1}")
    print("| " + " | ".join(CONTEXT_GRID) + " | " + " | ".join(f"R@{k}" for k in KS) + " |")
    print("|" + "---|" * (len(CONTEXT_GRID) + len(KS)))
    for setting in itertools.product(*CONTEXT_GRID.values()):
        figures = recall_at(questions, *setting)
        cells = [*map(str, setting), *(f"{x:.1f}" for x in figures)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
