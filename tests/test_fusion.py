"""Reciprocal rank fusion alone (`core/recall/fusion.py`): the arithmetic hybrid recall ranks by."""

from __future__ import annotations

import pytest

from recallstack.core.recall.fusion import fuse
from recallstack.core.runtime.config import Fusion

PLAIN = Fusion(weight=0.5, rrf_k=10, candidates=100, context_share=0.8, context_credit=0.25)


def test_each_signal_adds_its_weight_over_rrf_k_plus_rank() -> None:
    scores = fuse(PLAIN, {"a", "b", "c"}, dense=["a", "b"], keyword=["b", "c"])
    assert scores["a"] == pytest.approx(0.5 / 11)
    assert scores["b"] == pytest.approx(0.5 / 12 + 0.5 / 11)
    assert scores["c"] == pytest.approx(0.5 / 12)
    assert max(scores, key=scores.__getitem__) == "b"  # found by both signals


def test_the_weight_splits_the_signals() -> None:
    semantic_only = Fusion(weight=1.0, rrf_k=10, candidates=100, context_share=0, context_credit=0)
    scores = fuse(semantic_only, {"a", "k"}, dense=["a"], keyword=["k"])
    assert scores == {"a": pytest.approx(1 / 11), "k": 0.0}


def test_ids_that_are_not_candidates_are_dropped_before_ranks_are_counted() -> None:
    scores = fuse(PLAIN, {"a", "b"}, dense=["gone", "a"], keyword=["filtered", "b"])
    assert scores == {"a": pytest.approx(0.5 / 11), "b": pytest.approx(0.5 / 11)}


def test_a_contextual_hit_credits_the_message_before_it() -> None:
    scores = fuse(
        PLAIN, {"a", "b", "prev"}, dense=["a"], keyword=[], context=["b"], before={"b": "prev"}
    )
    semantic = 0.5 * (1 - 0.8)
    contextual = 0.5 * 0.8 * (1 - 0.25)
    credit = 0.5 * 0.8 * 0.25
    assert scores["a"] == pytest.approx(semantic / 11)
    assert scores["b"] == pytest.approx(contextual / 11)
    assert scores["prev"] == pytest.approx(credit / 11)


def test_without_contextual_hits_the_semantic_weight_is_the_messages_own() -> None:
    with_none = fuse(PLAIN, {"a"}, dense=["a"], keyword=[], context=[])
    assert with_none["a"] == pytest.approx(0.5 / 11)


def test_a_credit_to_a_message_that_is_not_a_candidate_is_dropped() -> None:
    scores = fuse(PLAIN, {"b"}, dense=[], keyword=[], context=["b"], before={"b": "elsewhere"})
    assert set(scores) == {"b"}
