"""The base of recallstack's pydantic models: bad fields raise `InvalidInputError`.

A caller builds messages, threads and options from these models; whatever is
wrong with them is one of recallstack's errors, naming the model and field,
never a raw `pydantic.ValidationError` (kept as the cause).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ValidationError

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


class Model(BaseModel):
    """A pydantic model that raises `InvalidInputError` for invalid input."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidInputError(describe(exc, type(self).__name__)) from exc

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        try:
            return super().model_validate(obj, **options)
        except ValidationError as exc:
            raise InvalidInputError(describe(exc, cls.__name__)) from exc

    @classmethod
    def model_validate_json(cls, json_data: Any, **options: Any) -> Self:
        try:
            return super().model_validate_json(json_data, **options)
        except ValidationError as exc:
            raise InvalidInputError(describe(exc, cls.__name__)) from exc
