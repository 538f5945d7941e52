"""Throwaway instances of the mongo backend for the conformance suite and the tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from recallstack.adapters.mongo import URL_ENV


@contextmanager
def stand_in() -> Iterator[str]:
    """A fresh database on mongomock, the in-process stand-in."""
    yield f"mongomock://recallstack/{_fresh_name()}"


@contextmanager
def server() -> Iterator[str]:
    """A fresh database on the deployment `$RECALLSTACK_MONGODB_URL` names, dropped after."""
    import pymongo

    parts = urlsplit(os.environ[URL_ENV])
    name = _fresh_name()
    yield urlunsplit(parts._replace(path=f"/{name}"))
    client: pymongo.MongoClient[dict[str, object]]
    with pymongo.MongoClient(os.environ[URL_ENV]) as client:
        client.drop_database(name)


def _fresh_name() -> str:
    return f"recallstack_test_{uuid.uuid4().hex[:12]}"
