"""The base of recallstack's pydantic models: bad fields raise `InvalidInputError`.

A caller builds messages, threads and options from these models; whatever is
wrong with them is one of recallstack's errors, naming the model and field,
never a raw `pydantic.ValidationError` (kept as the cause).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ValidationError

from recallstack.core.errors import InvalidInputError


def describe(error: ValidationError, model: str) -> str:
    """One line per bad field: `Model.field.path: what is wrong`."""
    parts = []
    for e in error.errors(include_url=False):
        original = e.get("ctx", {}).get("error")
        if isinstance(original, InvalidInputError) and not e["loc"]:
            parts.append(str(original))  # our own __init__ ran inside validation
            continue
        where = ".".join(str(p) for p in (model, *e["loc"]))
        message = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


@contextmanager
def input_errors(model: str) -> Iterator[None]:
    """Turn pydantic's validation error into an `InvalidInputError` (kept as its cause)."""
    try:
        yield
    except ValidationError as exc:
        raise InvalidInputError(describe(exc, model)) from exc


class Model(BaseModel):
    """A pydantic model that raises `InvalidInputError` for invalid input."""

    def __init__(self, /, **data: Any) -> None:
        with input_errors(type(self).__name__):
            super().__init__(**data)

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        with input_errors(cls.__name__):
            return super().model_validate(obj, **options)

    @classmethod
    def model_validate_json(cls, json_data: Any, **options: Any) -> Self:
        with input_errors(cls.__name__):
            return super().model_validate_json(json_data, **options)


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic would take True for 1
        raise ValueError("must be an integer, not a bool")
    return value


Integer = Annotated[int, BeforeValidator(_not_a_bool)]
"""An int option: `top_k=True` is a mistake, not 1."""
