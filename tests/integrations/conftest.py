"""What the agent-framework integrations' tests share: an `AsyncMemory` on LibSQL and
on Postgres, with the hash embedder and a small recall (the best two, no neighbours)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from recallstack import AsyncMemory

OPTIONS = {"last_messages": 4, "semantic_recall": {"top_k": 2, "message_range": 0}}


@pytest.fixture(params=["libsql", "pg"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncMemory]:
    url = f"libsql:///{tmp_path / 'm.db'}"
    if request.param == "pg":
        url = request.getfixturevalue("pg_url")
    async with AsyncMemory(url, url, "hash/64", OPTIONS) as mem:
        yield mem
