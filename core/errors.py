"""The one error hierarchy: every failure a user can see is a `RecallstackError`."""

from __future__ import annotations

from typing import Any


class RecallstackError(Exception):
    """Base class of every error raised by recallstack."""


class InvalidInputError(RecallstackError, ValueError):
    """An argument is malformed: wrong length, NaN, empty batch, bad id, bad metadata."""


class FilterError(InvalidInputError):
    """A filter document is malformed; `path` locates the offending part."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(f"{message} (at {path})" if path else message)


class UnsupportedFilterError(RecallstackError):
    """A backend cannot honour an operator exactly, so it refuses the filter."""

    def __init__(self, operator: str, backend: str) -> None:
        self.operator = operator
        self.backend = backend
        super().__init__(f"the {backend} backend does not support the filter operator {operator}")


class UnsupportedFeatureError(RecallstackError):
    """A backend cannot honour a requested feature (metric, index type, mode)."""


class DimensionMismatchError(InvalidInputError):
    """A vector's size differs from the index's dimension."""

    def __init__(self, expected: int, got: int, where: str) -> None:
        self.expected = expected
        self.got = got
        super().__init__(f"{where}: expected dimension {expected}, got {got}")


class IndexNotFoundError(RecallstackError, LookupError):
    """The named vector index does not exist."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"vector index {name!r} does not exist")


class NotFoundError(RecallstackError, LookupError):
    """A thread, message or resource that must exist does not."""


class BackendError(RecallstackError):
    """The backend failed; the original exception is kept as `__cause__`."""


class EmbeddingRefusedError(BackendError):
    """Some inputs of a batch could not be embedded; the others were.

    `refused` maps an input's position to the reason; `vectors` holds every
    input's row, the refused ones' rows zero.
    """

    def __init__(self, refused: dict[int, str], vectors: Any) -> None:
        first = min(refused)
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        super().__init__(f"input {first} was refused: {refused[first]}{more}")
        self.refused = refused
        self.vectors = vectors


def refuse_newer(component: str, stored: int, known: int) -> None:
    """A database whose schema a newer recallstack wrote is left untouched: migrating
    it "back" would record the older version over tables the older code never made."""
    if stored > known:
        raise BackendError(
            f"the database's {component} schema is version {stored}, written by a newer "
            f"recallstack; this one knows versions up to {known}: upgrade recallstack"
        )


class MissingDependencyError(RecallstackError, ImportError):
    """A backend's optional driver (or an integration's framework) is not installed; the
    message names the extra."""

    def __init__(self, backend: str, module: str, extra: str, *, kind: str = "backend") -> None:
        self.backend = backend
        self.module = module
        self.extra = extra
        super().__init__(
            f'the {backend} {kind} needs the {module!r} package: pip install "recallstack[{extra}]"'
        )


class UnknownBackendError(RecallstackError, LookupError):
    """No registered plugin answers a URL scheme or name."""
