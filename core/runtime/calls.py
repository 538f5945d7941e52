"""Backend calls as values: the memory's logic is written once and run blocking or awaited.

`Memory`, `SemanticRecall` and `MessageHistory` write each operation as a
generator of steps: it yields the backend calls it needs and is sent their
results (`thread = yield from call(Storage.get_thread, thread_id)`). `run`
performs them on blocking backends, for `Memory`; `arun` awaits them on
asynchronous ones, for `AsyncMemory`. Neither copy of the API holds any
logic of its own (the "sans-I/O" pattern).

A call names its backend by the attribute that holds it: the snake-case name
of the method's class (`Storage.get_thread` is `backends.storage.get_thread`,
`VectorStore.query` is `backends.vector_store.query`), so the object the
runner is given is a plain record of typed fields (`core/runtime/engine.py`'s
`Backends`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeAlias, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    """`backends.<backend>.<method>(*args, **kwargs)`; the backend is the attribute
    named for its contract's class (`storage`, `vector_store`, `cached_embedder`)."""

    backend: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Steps: TypeAlias = Generator[Call, Any, R]
"""An operation: yields the calls it needs, returns its result."""


def call(
    method: Callable[Concatenate[Any, P], R], /, *args: P.args, **kwargs: P.kwargs
) -> Steps[R]:
    """One backend call, typed by its contract's method:
    `thread = yield from call(Storage.get_thread, thread_id)`."""
    owner, _, name = method.__qualname__.partition(".")
    result: R = yield Call(attribute_of(owner), name, args, kwargs)
    return result


PARTS = {"IndexLedger": "storage"}
"""Classes that are part of another contract: `Storage` is an `IndexLedger`, so
`call(Storage.mark_indexed, ...)` (defined on `IndexLedger`) reaches the storage."""


@functools.cache
def attribute_of(class_name: str) -> str:
    """The attribute that holds a backend of this class: `VectorStore` → `vector_store`."""
    return PARTS.get(class_name) or re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def run(steps: Steps[R], backends: object) -> R:
    """Perform an operation's calls on blocking backends, by attribute; errors are
    raised into the operation where its call was made."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            result = getattr(getattr(backends, step.backend), step.method)(
                *step.args, **step.kwargs
            )
        except Exception as exc:
            error = exc


async def arun(steps: Steps[R], backends: object) -> R:
    """`run` for asynchronous backends: each call's result is awaited."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            method: Callable[..., Awaitable[Any]] = getattr(
                getattr(backends, step.backend), step.method
            )
            result = await method(*step.args, **step.kwargs)
        except Exception as exc:
            error = exc
