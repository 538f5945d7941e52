"""Semantic recall, by job: indexing (chunk, embed, upsert, ledger, contextual vectors),
retrieval (nearest, keyword, neighbour windows), fusion (reciprocal rank, pure), and
the processor that runs them (`SemanticRecall`)."""

from recallstack.core.recall.processor import SemanticRecall
from recallstack.core.recall.records import Hit, IndexReport, Recalled

__all__ = ["Hit", "IndexReport", "Recalled", "SemanticRecall"]
