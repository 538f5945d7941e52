"""Which indexes a memory's vectors live in: one name for every read and write path."""

from __future__ import annotations

from recallstack.core.contracts.embedder import Embedder, index_name
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.runtime.config import SemanticRecallConfig


def main_index(config: SemanticRecallConfig, model: Embedder) -> str:
    """The index of the messages' own vectors: the configured name, or one made from
    the model's id and dimension."""
    return config.index_name or index_name(model.model_id, model.dimension)


def context_index(config: SemanticRecallConfig, model: Embedder) -> str | None:
    """The index of contextual vectors (`HybridConfig.context`), named for the main
    index and the context's size so that vectors of two kinds never share one."""
    size = config.context
    return f"{main_index(config, model)}_context{size}" if size else None


def own_indexes(config: SemanticRecallConfig, model: Embedder) -> set[str]:
    """The indexes a memory writes with `config`: it can re-embed their vectors."""
    return {main_index(config, model), *filter(None, [context_index(config, model)])}


def existing_indexes(
    storage: Storage, vector: VectorStore, config: SemanticRecallConfig, model: Embedder
) -> list[str]:
    """Indexes that may hold a memory's vectors: those recorded in storage and its own,
    where they exist."""
    recorded = {*storage.index_names(), *own_indexes(config, model)}
    return sorted(recorded & set(vector.list_indexes()))
