"""API keys, each bound to exactly one resource: the resource a request acts for comes from
its key, never from its body."""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Mapping
from pathlib import Path

from recallstack.core.errors import InvalidInputError
from recallstack.core.inputs import check_id

KEYS_ENV = "RECALLSTACK_API_KEYS"
"""A JSON object `{"key": "resource_id"}`, when no keys file is given."""
MIN_KEY_LENGTH = 16
"""Shorter keys are refused: a key is a secret, not a name."""


class Keys:
    """Bearer keys and their resources. A key is compared with every known key in constant
    time (`hmac.compare_digest`), and no error or log line ever holds one."""

    def __init__(self, keys: Mapping[str, str]) -> None:
        if not isinstance(keys, Mapping) or not keys:
            raise InvalidInputError('API keys: expected a JSON object {"key": "resource_id"}')
        checked: list[tuple[bytes, str]] = []
        for n, (key, resource) in enumerate(keys.items(), start=1):
            if not isinstance(key, str) or len(key) < MIN_KEY_LENGTH or not key.isprintable():
                raise InvalidInputError(
                    f"API keys: key number {n} must be printable and at least "
                    f"{MIN_KEY_LENGTH} characters long"
                )
            checked.append((key.encode(), check_id(resource, f"the resource of key number {n}")))
        self._keys = checked

    @classmethod
    def from_file(cls, path: str | Path) -> Keys:
        """Keys from a JSON file `{"key": "resource_id"}`."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise InvalidInputError(f"API keys: cannot read {str(path)!r}: {why}") from None
        return cls._parsed(text, repr(str(path)))

    @classmethod
    def from_env(cls) -> Keys | None:
        """Keys from `RECALLSTACK_API_KEYS`, or None when it is not set."""
        text = os.environ.get(KEYS_ENV)
        return None if not text else cls._parsed(text, KEYS_ENV)

    @classmethod
    def _parsed(cls, text: str, where: str) -> Keys:
        try:
            keys = json.loads(text)
        except json.JSONDecodeError as exc:  # its message quotes no text
            raise InvalidInputError(f"API keys: {where} is not JSON ({exc.msg})") from None
        return cls(keys)

    def resource_of(self, key: str) -> str | None:
        """The resource `key` is bound to, or None for an unknown key."""
        given = key.encode()
        found = None
        for known, resource in self._keys:  # every key compared: the time tells nothing
            if hmac.compare_digest(given, known):
                found = resource
        return found
