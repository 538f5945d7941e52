"""The hooks a recallstack plugin implements.

A plugin is a module or object listed under the `recallstack` entry-point
group. Each hook receives a `register` callback and calls it once per backend,
so one plugin can provide several. The built-in backends are registered the
same way, through the same entry points.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from recallstack.core.contracts.embedder import Embedder
    from recallstack.core.contracts.storage import Storage
    from recallstack.core.contracts.vector_store import VectorStore
    from recallstack.core.runtime.registry import Backend, ConformanceTarget

hookspec = pluggy.HookspecMarker("recallstack")
hookimpl = pluggy.HookimplMarker("recallstack")


@hookspec
def register_vector_stores(register: Callable[[Backend[VectorStore]], None]) -> None:
    """Register vector store backends: `register(Backend(kind="vector", ...))`.

    The factory receives the URL and keyword options and returns a `VectorStore`.
    """


@hookspec
def register_storages(register: Callable[[Backend[Storage]], None]) -> None:
    """Register storage backends: `register(Backend(kind="storage", ...))`.

    The factory receives the URL and keyword options and returns a `Storage`.
    """


@hookspec
def register_embedders(register: Callable[[Backend[Embedder]], None]) -> None:
    """Register embedders: `register(Backend(kind="embedder", schemes=("provider",), ...))`.

    They are chosen by `provider/model` strings; the factory receives the whole
    string and keyword options and returns an `Embedder`.
    """


@hookspec
def register_conformance_targets(register: Callable[[ConformanceTarget], None]) -> None:
    """Tell the conformance suite how to start a throwaway instance of a backend.

    `register(ConformanceTarget(backend=..., kind=..., start=...))` where `start`
    is a context manager factory that yields a URL and cleans up on exit.
    """
