"""Hybrid recall's fusion settings replayed on LoCoMo: R@k for each setting tried.

    python bench/locomo_fusion.py ../shared/data/locomo/locomo-dev.json [--conversations N]

`bench/locomo.py` measures one setting through the public API, ingesting the
whole half each time. This embeds the turns and the questions once (the
offline local model, turn text as `bench/locomo.py` writes it), ranks each
question's turns by cosine and by BM25 (`core/keywords.py`, with the
conversation's own statistics, as every backend computes them), then fuses
the two rankings as `SemanticRecall` does, for every `rrf_k`, `weight` and
`candidates` of the grid: a grid costs seconds. Its figures for a setting
are `bench/locomo.py`'s (checked for the default and the old default).
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from locomo import CATEGORIES, KS, PAPER, evidence, sessions, turn_text

from recallstack.core.keywords import bm25, query_terms, words
from recallstack.core.registry import registry

GRID = {"rrf_k": (5, 10, 20, 60), "weight": (0.4, 0.5, 0.6), "candidates": (100, 300)}
TOP = max(KS)


def rankings(data: list[dict[str, Any]]) -> list[tuple[set[str], list[str], list[str]]]:
    """Per question of categories 1-4: (its evidence, turns by cosine, turns by BM25)."""
    embedder = registry().embedder("local/all-MiniLM-L6-v2")
    found = []
    for sample in data:
        turns = [t for _, _, session in sessions(sample["conversation"]) for t in session]
        ids = [t["dia_id"] for t in turns]
        texts = [turn_text(t) for t in turns]
        vectors = embedder.embed(texts)
        documents = {i: Counter(words(text)) for i, text in zip(ids, texts, strict=True)}
        questions = [qa for qa in sample["qa"] if qa.get("category") in CATEGORIES]
        asked = embedder.embed([qa["question"] for qa in questions])
        for qa, query in zip(questions, asked, strict=True):
            by_cosine = [ids[n] for n in np.argsort(-(vectors @ query), kind="stable")]
            scores = bm25(query_terms(qa["question"]), documents)
            by_words = sorted(scores, key=lambda i: (-scores[i], i))
            found.append((evidence(qa), by_cosine, by_words))
    return found


def recall_at(
    questions: list[tuple[set[str], list[str], list[str]]], rrf_k: int, weight: float, pool: int
) -> list[float]:
    """R@k over the questions, fused as SemanticRecall fuses (top_k = the largest k)."""
    totals = [0.0] * len(KS)
    for wanted, by_cosine, by_words in questions:
        fused: dict[str, float] = {}
        for rank, i in enumerate(by_cosine[: max(TOP, pool)], start=1):
            fused[i] = fused.get(i, 0.0) + weight / (rrf_k + rank)
        for rank, i in enumerate(by_words[:pool], start=1):
            fused[i] = fused.get(i, 0.0) + (1 - weight) / (rrf_k + rank)
        ranked = sorted(fused, key=lambda i: (-fused[i], i))[:TOP]
        for n, k in enumerate(KS):
            totals[n] += len(wanted & set(ranked[:k])) / len(wanted) if wanted else 1.0
    return [100 * t / len(questions) for t in totals]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a LoCoMo JSON file")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    args = parser.parse_args()
    data = json.loads(args.path.read_text())[: args.conversations]
    questions = rankings(data)
    print(f"{len(questions)} questions; R@{' / R@'.join(map(str, KS))}")
    print("| rrf_k | weight | candidates | " + " | ".join(f"R@{k}" for k in KS) + " |")
    print("|---|---|---|" + "---|" * len(KS))
    for rrf_k, weight, pool in itertools.product(*GRID.values()):
        figures = recall_at(questions, rrf_k, weight, pool)
        print(f"| {rrf_k} | {weight} | {pool} | " + " | ".join(f"{x:.1f}" for x in figures) + " |")
    for name, figures in PAPER.items():
        print(f"| {name} | | | " + " | ".join(f"{x:.1f}" for x in figures) + " |")


if __name__ == "__main__":
    main()
