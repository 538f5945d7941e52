"""Backend calls as values: the memory's logic is written once and run blocking or awaited.

`Memory`, `SemanticRecall` and `MessageHistory` write each operation as a
generator of steps: it yields the backend calls it needs and is sent their
results (`thread = yield from call(Storage.get_thread, thread_id)`). `run`
performs them on blocking backends, for `Memory`; `arun` awaits them on
asynchronous ones, for `AsyncMemory`. Neither copy of the API holds any
logic of its own (the "sans-I/O" pattern).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeAlias, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    """`<backend>.<method>(*args, **kwargs)`; the backend is named by its contract's
    class (`Storage`, `VectorStore`, `CachedEmbedder`)."""

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
    backend, _, name = method.__qualname__.partition(".")
    result: R = yield Call(backend, name, args, kwargs)
    return result


def run(steps: Steps[R], backends: Mapping[str, object]) -> R:
    """Perform an operation's calls on blocking backends, by contract name; errors are
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
            result = getattr(backends[step.backend], step.method)(*step.args, **step.kwargs)
        except Exception as exc:
            error = exc


async def arun(steps: Steps[R], backends: Mapping[str, object]) -> R:
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
            method: Callable[..., Awaitable[Any]] = getattr(backends[step.backend], step.method)
            result = await method(*step.args, **step.kwargs)
        except Exception as exc:
            error = exc
