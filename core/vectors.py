"""Vector-side models: metrics, index configuration, statistics, query results, stored
vectors."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from recallstack.core.model import Integer, Model

Matrix = npt.NDArray[np.float32]
"""Vectors as rows of float32 (or one vector, one-dimensional)."""
Metric = Literal["cosine", "euclidean", "dotproduct"]
IndexType = Literal["hnsw", "ivfflat", "flat", "diskann"]
METRICS: tuple[Metric, ...] = ("cosine", "euclidean", "dotproduct")


class IndexConfig(Model):
    """How a backend should index vectors. `type=None` means the backend's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: IndexType | None = None
    metric: Metric = "cosine"
    m: Integer = Field(default=16, gt=0)
    ef_construction: Integer = Field(default=64, gt=0)
    lists: Integer = Field(default=100, gt=0)


class IndexStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    dimension: int
    count: int
    metric: Metric


class QueryResult(BaseModel):
    """One hit. `score` follows the one convention: higher is better (docs/spec/backends.md §3)."""

    model_config = ConfigDict(frozen=True)

    id: str
    score: float
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = None


class StoredVector(BaseModel):
    """A vector as stored, read by its id (`VectorStore.get`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    vector: list[float]
    metadata: dict[str, Any] = Field(default_factory=dict)


_new = object.__new__
_set_dict = object.__setattr__
# the slots BaseModel declares, set through their descriptors: a frozen model refuses setattr
_set_fields_set = vars(BaseModel)["__pydantic_fields_set__"].__set__
_set_extra = vars(BaseModel)["__pydantic_extra__"].__set__
_set_private = vars(BaseModel)["__pydantic_private__"].__set__


def trusted_hit(
    id: str, score: float, metadata: dict[str, Any], vector: list[float] | None
) -> QueryResult:
    """A hit built from values a backend already produced, without validation.

    Every query builds up to top_k of these: `model_construct` costs about
    2.5 µs each, this 0.75 µs (it sets exactly what `model_construct` sets).
    """
    hit = _new(QueryResult)
    _set_dict(hit, "__dict__", {"id": id, "score": score, "metadata": metadata, "vector": vector})
    _set_fields_set(hit, {"id", "score", "metadata", "vector"})
    _set_extra(hit, None)
    _set_private(hit, None)
    return hit
