"""Adapters to the interfaces of agent frameworks. Each module imports its framework,
so it needs that framework's extra (`pip install "recallstack[langchain]"`); without
it, importing the module raises `MissingDependencyError` naming the extra."""

from __future__ import annotations

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.errors import InvalidInputError, MissingDependencyError


def missing(name: str, exc: ImportError, extra: str) -> MissingDependencyError:
    """The error for an integration whose framework did not import."""
    return MissingDependencyError(name, exc.name or extra, extra, kind="integration")


def async_memory(memory: object) -> AsyncMemory:
    """`memory`, checked to be the `AsyncMemory` the agent integrations work on."""
    if not isinstance(memory, AsyncMemory):
        raise InvalidInputError(f"memory must be an AsyncMemory, got {type(memory).__name__}")
    return memory
