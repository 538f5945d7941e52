"""Memory configuration, with the defaults of docs/spec/semantic-recall.md §3."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from recallstack.core.filters import Node, parse_filter
from recallstack.core.model import Integer, Model
from recallstack.core.vectors import IndexConfig


class MessageRange(Model):
    """How many neighbours to fetch before and after each recalled message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    before: Integer = Field(default=1, ge=0)
    after: Integer = Field(default=1, ge=0)


@dataclass(frozen=True)
class Fusion:
    """The numbers hybrid recall fuses with: `HybridConfig`'s, its unset ones filled in."""

    weight: float
    rrf_k: int
    candidates: int
    context_share: float
    context_credit: float


# Measured on LoCoMo (docs/guide.md): the best without and with contextual vectors. With
# them, 50 candidates: 300 scored 0.4 higher at R@25 and doubled a recall's latency.
FUSION_DEFAULTS = {
    False: Fusion(weight=0.5, rrf_k=10, candidates=100, context_share=0.85, context_credit=0.55),
    True: Fusion(weight=0.6, rrf_k=10, candidates=50, context_share=0.85, context_credit=0.55),
}


class HybridConfig(Model):
    """Hybrid recall: the semantic and the keyword signal fused by reciprocal rank, and
    optionally contextual vectors. Fields left unset (None) take the defaults measured
    for this `context` (`fusion`), so that changing `context` alone moves them too."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context: Integer = Field(default=1, ge=0, le=8)
    """Messages before each message in its thread that are embedded with it into a
    second, contextual vector (0: none). Its own index, so turning it on never mixes
    vectors of two kinds; `Memory.reindex()` fills it for messages saved before. It
    costs a second embedding per saved message."""
    weight: float | None = Field(default=None, ge=0, le=1)
    """The semantic signals' share of the fused score; the keyword signal has the rest."""
    rrf_k: Integer | None = Field(default=None, gt=0)
    """Reciprocal rank fusion's constant: a hit ranked r adds its weight / (rrf_k + r).
    Small, so the first few hits of each signal lead."""
    candidates: Integer | None = Field(default=None, gt=0, le=10_000)
    """How many hits each signal contributes before fusion."""
    context_share: float | None = Field(default=None, ge=0, le=1)
    """With `context`: the contextual vectors' part of the semantic share; the
    message's own vectors have the rest."""
    context_credit: float | None = Field(default=None, ge=0, le=1)
    """With `context`: the part of a contextual hit's weight credited to the message
    just before it (the context that made it match), rather than to the hit."""

    @property
    def fusion(self) -> Fusion:
        """The numbers to fuse with: those set here, the measured defaults otherwise."""
        given = {f: getattr(self, f) for f in Fusion.__dataclass_fields__}
        chosen = {f: v for f, v in given.items() if v is not None}
        return replace(FUSION_DEFAULTS[self.context > 0], **chosen)


class SemanticRecallConfig(Model):
    """Semantic recall options; `True` in `MemoryConfig` means all of these defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    top_k: Integer = Field(default=4, gt=0)
    message_range: MessageRange = MessageRange()
    scope: Literal["thread", "resource"] = "resource"
    threshold: float | None = None
    filter: dict[str, Any] | None = None
    index_name: str | None = Field(default=None, min_length=1)
    index_config: IndexConfig = IndexConfig()
    chunk_overlap: Integer = Field(default=32, ge=0)
    """Tokens consecutive chunks of a long message share (at most half a chunk)."""
    hybrid: HybridConfig | Literal[False] = HybridConfig()
    """Fuse a keyword signal (BM25, from storage) with the semantic one and contextual
    vectors' (True: these defaults); False: the semantic signal alone. On by default:
    on LoCoMo it finds 17 points more of the evidence in the top 5 (docs/guide.md).
    Unless set, it is off on a storage without keyword search (`fitted`)."""

    @property
    def context(self) -> int:
        """How many earlier messages a contextual vector holds (0: none)."""
        return self.hybrid.context if self.hybrid else 0

    @field_validator("hybrid", mode="before")
    @classmethod
    def _hybrid(cls, value: Any) -> Any:
        return HybridConfig() if value is True else value

    @field_validator("message_range", mode="before")
    @classmethod
    def _range(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("message_range is an int or {before, after}")
        return {"before": value, "after": value} if isinstance(value, int) else value

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        parse_filter(value)  # raises FilterError with the offending path
        return value

    @functools.cached_property
    def filter_node(self) -> Node | None:
        """`filter` as a filter tree, parsed once per configuration, not per query."""
        return None if self.filter is None else parse_filter(self.filter)


class MemoryConfig(Model):
    """What memory loads into each turn: the one configuration `Memory` and both
    processors read (`config.merged(overrides)` for a call's effective one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    last_messages: int | Literal[False] = 10
    """Recent messages of the thread to load; False disables history."""
    semantic_recall: SemanticRecallConfig | Literal[False] = False
    """Off unless enabled; True means the defaults."""

    @field_validator("semantic_recall", mode="before")
    @classmethod
    def _recall(cls, value: Any) -> Any:
        return SemanticRecallConfig() if value is True else value

    @model_validator(mode="after")
    def _history(self) -> MemoryConfig:
        if self.last_messages is not False and (
            isinstance(self.last_messages, bool) or self.last_messages < 0
        ):
            raise ValueError("last_messages is an int >= 0 or False")
        return self

    def merged(self, overrides: Mapping[str, Any] | None) -> MemoryConfig:
        """This configuration with per-call overrides deep-merged over it."""
        if not overrides:
            return self
        base = self.model_dump()
        changes = dict(overrides)
        recall = changes.get("semantic_recall")
        if recall is True or isinstance(recall, Mapping):
            if not self.semantic_recall:
                base["semantic_recall"] = SemanticRecallConfig().model_dump()
            if recall is True:
                del changes["semantic_recall"]
            elif "filter" in recall:  # a filter replaces, never merges key by key
                base["semantic_recall"]["filter"] = None
        return MemoryConfig.model_validate(deep_merge(base, changes))

    @property
    def recall_or_default(self) -> SemanticRecallConfig:
        """The semantic recall options, or their defaults when recall is off: what
        names the index and chunks messages for `reindex` and deletes either way."""
        return self.semantic_recall or DEFAULT_RECALL


DEFAULT_RECALL = SemanticRecallConfig()


def fitted(config: MemoryConfig, keyword_search: bool) -> MemoryConfig:
    """`config` for a storage: one without keyword search gets semantic recall alone,
    unless hybrid recall was asked for by name (the storage then refuses it)."""
    recall = config.semantic_recall
    if keyword_search or not recall or "hybrid" in recall.model_fields_set:
        return config
    return config.model_copy(
        update={"semantic_recall": recall.model_copy(update={"hybrid": False})}
    )


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts merge key by key; any other value in `overrides` replaces."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(dict(out[key]), dict(value))
        else:
            out[key] = value
    return out
