"""What a caller may pass: ids, text and JSON documents, checked once at the boundary.

The resource is the security boundary, so an id is a plain string before any
backend sees it (a dict passed as an id would become a filter operator). Text
must be encodable as UTF-8 and free of NUL, which no SQL backend stores
alike. Every failure is an `InvalidInputError` that names the argument.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import AfterValidator, Strict, StringConstraints

from recallstack.core.errors import InvalidInputError

MAX_ID_LENGTH = 512
"""Characters in a thread, resource or message id."""
MAX_DEPTH = 32
"""Nesting of objects and lists in a metadata document."""
MAX_QUERY_LENGTH = 100_000
"""Characters in a recall query (`vector_search_string`): about 25,000 tokens."""


def is_positive_int(value: object) -> bool:
    """The test behind every count and size a caller passes: an int above zero,
    `True` refused although Python counts it as the int 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_text(value: str, name: str) -> str:
    """Text that every backend stores as given: valid UTF-8 (no lone surrogate), no NUL."""
    if "\x00" in value:
        raise InvalidInputError(f"{name}: NUL characters are not allowed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{name}: not valid Unicode text (a lone surrogate at index {exc.start})"
        ) from None
    return value


def json_line(line: bytes, number: int) -> Any:
    """One line of a JSON-lines file, decoded; `None` for a blank line. Not UTF-8, not
    JSON, or nested deeper than Python's parser goes: an `InvalidInputError` naming
    the line."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"line {number}: not UTF-8 ({exc.reason})") from None
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"line {number}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise InvalidInputError(
            f"line {number}: nested too deeply (documents may nest {MAX_DEPTH} levels)"
        ) from None


def check_id(value: Any, name: str) -> str:
    """A public id argument: a non-empty string of at most `MAX_ID_LENGTH` characters."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidInputError(f"{name} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInputError(f"{name} is longer than {MAX_ID_LENGTH} characters")
    return check_text(value, name)


def check_ids(values: Any, name: str) -> list[str]:
    """A list of ids (a single string is refused: it is not a list of its characters)."""
    if isinstance(values, str | bytes) or not isinstance(values, list | tuple | set | frozenset):
        raise InvalidInputError(f"{name} must be a list of ids, got {type(values).__name__}")
    return [check_id(v, f"{name}[{n}]") for n, v in enumerate(values)]


def check_json(value: Any, name: str, depth: int = 0) -> Any:
    """A JSON document as every backend stores it: objects with string keys, lists,
    text, finite numbers, booleans and null, at most `MAX_DEPTH` deep."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return check_text(value, name)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{name}: {value} is not a finite number")
        return value
    if depth >= MAX_DEPTH:
        raise InvalidInputError(f"{name}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{name}: keys must be strings, got {key!r}")
            check_text(key, f"{name} key {key[:40]!r}")
            check_json(item, f"{name}.{key}", depth + 1)
        return value
    if isinstance(value, list):
        for n, item in enumerate(value):
            check_json(item, f"{name}[{n}]", depth + 1)
        return value
    raise InvalidInputError(
        f"{name}: {type(value).__name__} is not JSON "
        "(use str, int, float, bool, None, lists and objects)"
    )


def _id(value: str) -> str:
    return check_id(value, "id")


def _text(value: str) -> str:
    return check_text(value, "text")


def _document(value: Any) -> Any:
    return check_json(value, "metadata")


Id = Annotated[str, Strict(), StringConstraints(min_length=1), AfterValidator(_id)]
"""An id field of a model: a string (never coerced), checked as `check_id` checks."""
Text = Annotated[str, Strict(), AfterValidator(_text)]
"""A text field of a model, checked as `check_text` checks."""
Document = Annotated[dict[str, Any], AfterValidator(_document)]
"""A metadata field of a model: a JSON object, checked as `check_json` checks."""


def _arguments(value: Any) -> Any:
    return check_json(value, "tool call arguments")


def _result(value: Any) -> Any:
    return check_json(value, "tool result")


ToolArguments = Annotated[dict[str, Any], AfterValidator(_arguments)]
"""A tool call's arguments: a JSON object, checked as metadata is."""
ToolResult = Annotated[Any, AfterValidator(_result)]
"""A tool's result: any JSON value, checked as metadata is."""
