"""The one score convention, computed exactly with numpy.

cosine → cosine similarity; euclidean → 1 / (1 + L2 distance); dotproduct →
inner product. Higher is better on every metric, so a threshold is portable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, Protocol, TypeVar, overload

import numpy as np
import numpy.typing as npt

from recallstack.core.vectors import Matrix, Metric, QueryResult, trusted_hit

Hit = TypeVar("Hit")
_CHUNK = 8192  # rows per step of the euclidean path, to bound its memory
_SCORE, _ID = itemgetter(0), itemgetter(1)


def row_norms(matrix: Matrix) -> npt.NDArray[np.float64]:
    """L2 norms of the rows; stores that keep a matrix cache these for cosine."""
    norms: npt.NDArray[np.float64] = np.linalg.norm(matrix, axis=1).astype(np.float64)
    return norms


def score(
    matrix: Matrix,
    query: Matrix,
    metric: Metric,
    norms: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Scores of every row of `matrix` (n, d) against `query` (d,).

    Products run in float32 (the precision vectors are stored in) and scores
    come back as float64; `norms` may pass precomputed `row_norms(matrix)`.
    """
    if metric == "euclidean":
        distances = np.concatenate(
            [
                np.linalg.norm(matrix[i : i + _CHUNK] - query, axis=1)
                for i in range(0, max(len(matrix), 1), _CHUNK)
            ]
        ).astype(np.float64)
        result: npt.NDArray[np.float64] = 1.0 / (1.0 + distances)
        return result
    dots = (matrix @ query).astype(np.float64)
    if metric == "dotproduct":
        return dots
    if norms is None:
        norms = row_norms(matrix)
    cosine: npt.NDArray[np.float64] = dots / (norms * float(np.linalg.norm(query)))
    return np.clip(cosine, -1.0, 1.0, out=cosine)  # rounding steps past ±1 (a vector with itself)


def from_distance(distance: float, metric: Metric) -> float:
    """Convert a backend's distance (cosine distance, L2, negative inner product) to a score."""
    if metric == "cosine":
        return 1.0 - distance
    if metric == "euclidean":
        return 1.0 / (1.0 + distance)
    return -distance


class Ids(Protocol):
    """Row ids by row position: a list, or a view that looks them up when asked."""

    def __getitem__(self, index: int, /) -> str: ...

    def __len__(self) -> int: ...


def best(
    scores: npt.NDArray[np.float64],
    ids: Ids,
    top_k: int,
    min_score: float | None = None,
) -> list[int]:
    """Row positions of the top_k scores, best first, ties broken by id."""
    keep = np.arange(len(scores))
    if min_score is not None:
        keep = keep[scores[keep] >= min_score]
    if len(keep) > top_k:
        cutoff = np.partition(scores[keep], len(keep) - top_k)[len(keep) - top_k]
        keep = keep[scores[keep] >= cutoff]
    keep = keep[np.argsort(-scores[keep], kind="stable")]
    if not (np.diff(scores[keep]) == 0).any():  # no ties: the score alone orders them
        return keep[:top_k].tolist()  # type: ignore[no-any-return]
    ranked = sorted(
        zip(scores[keep].tolist(), keep.tolist(), strict=True), key=lambda h: (-h[0], ids[h[1]])
    )
    return [i for _, i in ranked[:top_k]]


def ranked(
    rows: Iterable[tuple[float, str, dict[str, Any], list[float] | None]],
    top_k: int,
    min_score: float | None,
) -> list[QueryResult]:
    """Backend answers as (score, id, metadata, vector): best first, ties by id,
    at least `min_score`, at most `top_k`."""
    # by id, then by score descending: sorts are stable, and two sorts on C-level
    # keys cost half of one on a (-score, id) tuple built per row
    ordered = sorted(rows, key=_ID)
    ordered.sort(key=_SCORE, reverse=True)
    if min_score is not None:
        ordered = [row for row in ordered if row[0] >= min_score]
    return [
        trusted_hit(id_, score, metadata, vector)
        for score, id_, metadata, vector in ordered[:top_k]
    ]


@overload
def past_ties(
    search: Callable[[int], Sequence[Hit]], top_k: int, key: Callable[[Hit], float]
) -> Sequence[Hit]: ...


@overload
def past_ties(
    search: Callable[[int], Sequence[Hit]],
    top_k: int,
    key: Callable[[Hit], float],
    most: int | None,
) -> Sequence[Hit] | None: ...


def past_ties(
    search: Callable[[int], Sequence[Hit]],
    top_k: int,
    key: Callable[[Hit], float],
    most: int | None = None,
) -> Sequence[Hit] | None:
    """An ANN backend's hits, enough of them that ties at the cut can be ordered by id.

    `search(n)` returns the n nearest, best first; `key` is a hit's score or
    distance. One more than top_k is asked for, and four times more again
    while that extra hit ties with the last one kept. None when that would ask
    for more than `most` (the backend's own limit): the caller then answers
    exactly instead.
    """
    fetch = top_k + 1
    while True:
        if most is not None and fetch > most:
            return None
        hits = search(fetch)
        if len(hits) < fetch or key(hits[top_k - 1]) != key(hits[top_k]):
            return hits
        fetch *= 4
