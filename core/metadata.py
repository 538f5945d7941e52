"""Metadata documents: what a vector's metadata may hold, and its normal form.

Values are str, int, float, bool, None, lists of scalars and nested objects.
Datetimes become UTC epoch milliseconds so that they compare as numbers on
every backend. Keys are non-empty, do not start with `$` and contain no `.`
(a dot separates the parts of a filter path).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from recallstack.core.errors import InvalidInputError
from recallstack.core.inputs import MAX_DEPTH, check_text

Scalar = str | int | float | bool | None
Metadata = dict[str, Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PLAIN = frozenset({int, bool, type(None)})


def epoch_ms(value: datetime) -> int:
    """UTC epoch milliseconds of a datetime; a naive datetime is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)


def normalize_scalar(value: Any, where: str) -> Scalar:
    """Check one scalar, converting a datetime to epoch milliseconds."""
    if isinstance(value, datetime):
        return epoch_ms(value)
    if isinstance(value, str):
        return check_text(value, where)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where}: {value} is not a finite number")
        return value
    raise InvalidInputError(
        f"{where}: {type(value).__name__} is not a metadata value "
        "(use str, int, float, bool, None, a list of those, or an object)"
    )


def check_key(key: Any, where: str) -> str:
    """A metadata key: a non-empty string not starting with `$`, without `.`."""
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"{where}: metadata keys must be non-empty strings, got {key!r}")
    if key.startswith("$") or "." in key:
        raise InvalidInputError(
            f"{where}: metadata key {key!r} may not start with '$' or contain '.'"
        )
    return check_text(key, f"{where}: key {key[:40]!r}")


def normalize_metadata(
    metadata: Mapping[str, Any] | None, where: str = "metadata", depth: int = 0
) -> Metadata:
    """Validate a metadata document and return a plain, normalised copy."""
    if metadata is None:
        return {}
    if depth >= MAX_DEPTH:
        raise InvalidInputError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"{where}: expected an object, got {type(metadata).__name__}")
    result: Metadata = {}
    for key, value in metadata.items():
        check_key(key, where)
        if type(value) is str:
            result[key] = check_text(value, f"{where}.{key}")
            continue
        if type(value) in _PLAIN:
            # most values: nothing to check or convert, and no error path to name
            result[key] = value
            continue
        here = f"{where}.{key}"
        if isinstance(value, Mapping):
            result[key] = normalize_metadata(value, here, depth + 1)
        elif isinstance(value, list | tuple):
            result[key] = [normalize_scalar(item, f"{here}[{i}]") for i, item in enumerate(value)]
        else:
            result[key] = normalize_scalar(value, here)
    return result
