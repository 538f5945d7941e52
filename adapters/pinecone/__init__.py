"""Pinecone: a managed vector service, through the current SDK (package `pinecone`).

URLs: `pinecone://PREFIX` (index names start with PREFIX; `rs` when absent),
with the API key from `api_key=` or `PINECONE_API_KEY` (never logged, never in
an error). Options: `host=` the API host (Pinecone Local, or the test
emulator), `cloud` and `region` for serverless index creation, `namespace`.
The SDK is imported only when a store is built. No Pinecone runs on the
project's machines: the conformance suite runs on a loopback emulator of its
REST API (`emulator.py`), and on the real service when `PINECONE_API_KEY` is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.filters import ALL_OPERATORS
from recallstack.core.runtime.hookspecs import hookimpl
from recallstack.core.runtime.registry import Backend, ConformanceTarget

CAPABILITIES = Capabilities(
    operators=ALL_OPERATORS,
    exact=False,
    string_ranges=False,
    max_filter_values=1_000,
    max_top_k=10_000,
)
"""Pinecone's search is approximate, and it compares numbers only; a list of values
becomes a few typed values each in the filter Pinecone is sent."""
KEY_ENV = "PINECONE_API_KEY"


def _store(url: str, **options: Any) -> VectorStore:
    from recallstack.adapters.pinecone.store import PineconeVectorStore

    return PineconeVectorStore(url, **options)


@hookimpl
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    register(
        Backend(
            kind="vector",
            name="pinecone",
            schemes=("pinecone",),
            factory=_store,
            capabilities=CAPABILITIES,
            extra="pinecone",
            requires=("pinecone",),
            description="Pinecone serverless (approximate; typed metadata keys)",
        )
    )


@hookimpl
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    import os

    from recallstack.adapters.pinecone import targets

    register(
        ConformanceTarget(
            backend="pinecone",
            kind="vector",
            start=targets.emulator,
            mode="serverless",
            stand_in="a loopback emulator of the REST API",
            asyncio_driver=True,  # AsyncPinecone under AsyncMemory
        )
    )
    if os.environ.get(KEY_ENV):
        register(
            ConformanceTarget(
                backend="pinecone",
                kind="vector",
                start=targets.service,
                mode="service",
                asyncio_driver=True,
            )
        )
