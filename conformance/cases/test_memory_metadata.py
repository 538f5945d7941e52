"""Group 7: the reserved keys memory writes are filterable, and scopes never leak."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from recallstack.conformance.dataset import vectors
from recallstack.conformance.twin import Twin
from recallstack.core.metadata import epoch_ms


def _memory_index(twin: Twin) -> str:
    name = twin.index(6)
    rows: list[dict[str, Any]] = []
    for r in ("alice", "bob"):
        for t in range(3):
            for m in range(4):
                rows.append(
                    {
                        "message_id": f"{r}-{t}-{m}",
                        "thread_id": f"{r}-t{t}",
                        "resource_id": r,
                        "role": "user" if m % 2 == 0 else "assistant",
                        "created_at": epoch_ms(datetime(2024, 1, 1 + t, m, tzinfo=UTC)),
                        "chunk": 0,
                        "project": "x" if t == 0 else "y",
                    }
                )
    twin.upsert(name, [r["message_id"] for r in rows], vectors(len(rows), 6, seed=21), rows)
    return name


QUERY = vectors(1, 6, seed=22)[0]


def test_resource_scope_is_exact(twin: Twin) -> None:
    name = _memory_index(twin)
    hits = twin.query(name, QUERY, 100, filter={"resource_id": "alice"})
    assert len(hits) == 12
    assert {h.metadata["resource_id"] for h in hits} == {"alice"}


def test_thread_scope_is_exact(twin: Twin) -> None:
    name = _memory_index(twin)
    hits = twin.query(name, QUERY, 100, filter={"thread_id": "bob-t1"})
    assert {h.id for h in hits} == {f"bob-1-{m}" for m in range(4)}


def test_every_reserved_key_is_filterable(twin: Twin) -> None:
    name = _memory_index(twin)
    twin.query(name, QUERY, 100, filter={"message_id": "alice-0-0"})
    twin.query(name, QUERY, 100, filter={"role": "assistant", "resource_id": "bob"})
    twin.query(name, QUERY, 100, filter={"chunk": 0, "thread_id": "alice-t2"})
    since = epoch_ms(datetime(2024, 1, 2, tzinfo=UTC))
    twin.query(name, QUERY, 100, filter={"created_at": {"$gte": since}, "resource_id": "alice"})


def test_scope_and_user_filter_combined(twin: Twin) -> None:
    name = _memory_index(twin)
    hits = twin.query(name, QUERY, 4, filter={"$and": [{"resource_id": "alice"}, {"project": "x"}]})
    assert {h.metadata["thread_id"] for h in hits} == {"alice-t0"}


def test_one_resource_never_sees_another(twin: Twin) -> None:
    name = _memory_index(twin)
    for top_k in (1, 5, 50):
        hits = twin.query(name, QUERY, top_k, filter={"resource_id": "bob"})
        assert all(h.metadata["resource_id"] == "bob" for h in hits)
