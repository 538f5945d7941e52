"""The one score convention, computed exactly with numpy.

cosine → cosine similarity; euclidean → 1 / (1 + L2 distance); dotproduct →
inner product. Higher is better on every metric, so a threshold is portable.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from recallstack.core.vectors import Metric

Matrix = npt.NDArray[np.float32]


def score(matrix: Matrix, query: Matrix, metric: Metric) -> npt.NDArray[np.float64]:
    """Scores of every row of `matrix` (n, d) against `query` (d,)."""
    rows = matrix.astype(np.float64, copy=False)
    q = query.astype(np.float64, copy=False)
    result: npt.NDArray[np.float64]
    if metric == "dotproduct":
        result = rows @ q
    elif metric == "cosine":
        result = (rows @ q) / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
    else:
        result = 1.0 / (1.0 + np.linalg.norm(rows - q, axis=1))
    return result


def from_distance(distance: float, metric: Metric) -> float:
    """Convert a backend's distance (cosine distance, L2, negative inner product) to a score."""
    if metric == "cosine":
        return 1.0 - distance
    if metric == "euclidean":
        return 1.0 / (1.0 + distance)
    return -distance


def best(
    scores: npt.NDArray[np.float64],
    ids: Sequence[str],
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
    ranked = sorted(keep.tolist(), key=lambda i: (-scores[i], ids[i]))
    return ranked[:top_k]
