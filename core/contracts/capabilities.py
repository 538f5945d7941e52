"""What a backend can honour; the conformance suite holds it to its word."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from recallstack.core.filters import (
    ALL_OPERATORS,
    LIST_OPERATORS,
    RANGE_OPERATORS,
    REQUIRED_OPERATORS,
    Condition,
    Node,
    operators_in,
    walk,
)
from recallstack.core.vectors import METRICS, IndexType, Metric


class Capabilities(BaseModel):
    """Declared support. Undeclared operators and metrics must raise, never degrade."""

    model_config = ConfigDict(frozen=True)

    operators: frozenset[str] = REQUIRED_OPERATORS
    metrics: frozenset[Metric] = frozenset(METRICS)
    index_types: frozenset[IndexType] = frozenset({"flat"})
    exact: bool = True
    """Queries return the exact top-K (no approximate index in the way)."""
    stand_in: str | None = None
    """Set when tests run against a stand-in rather than the real engine."""
    string_ranges: bool = True
    """Whether `$gt`/`$gte`/`$lt`/`$lte` compare strings (in code-point order)."""
    max_filter_values: int = 10_000
    """The most values one `$in`, `$nin` or `$all` may list; a longer list is refused
    with `UnsupportedFilterError`. Memory splits its own id lists to fit."""
    max_top_k: int = 10_000
    """The largest `top_k` a query accepts; a larger one is refused before the backend
    is asked. It bounds the work of one query on every backend."""

    def unsupported(self, node: Node | None) -> str | None:
        """The first thing in a parsed filter this backend cannot honour exactly, or None."""
        missing = sorted(operators_in(node) - self.operators)
        if missing:
            return missing[0]
        if node is None:
            return None
        for n in walk(node):
            if not isinstance(n, Condition):
                continue
            if n.op in LIST_OPERATORS and len(n.value) > self.max_filter_values:
                return f"{n.op} with more than {self.max_filter_values:,} values"
            if n.op in RANGE_OPERATORS and isinstance(n.value, str) and not self.string_ranges:
                return f"{n.op} on strings"
        return None

    def model_post_init(self, _context: object) -> None:
        unknown = self.operators - ALL_OPERATORS
        if unknown:
            raise ValueError(f"unknown operators declared: {sorted(unknown)}")
        if not self.operators >= REQUIRED_OPERATORS:
            raise ValueError(
                f"required operators missing: {sorted(REQUIRED_OPERATORS - self.operators)}"
            )
