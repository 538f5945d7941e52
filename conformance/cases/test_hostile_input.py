"""Group 5 (continued): a corpus of hostile input, the same answer on every backend.

Filters and metadata with SQL, JSON-path and MQL injection in keys and values,
odd Unicode (right-to-left marks, combining marks, lone surrogates, NUL),
huge and deeply nested documents, NaN and infinities, wrong types for every
argument, and a message of a megabyte. Each case ends either in its
documented error or in the reference backend's answer, and what was stored
beforehand is compared with a snapshot after every case.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from recallstack.conformance.twin import Twin
from recallstack.core.contracts.storage import Storage
from recallstack.core.errors import FilterError, InvalidInputError
from recallstack.core.messages import Message
from recallstack.core.records import Thread
from recallstack.core.vectors import EVERYWHERE

ODD_TEXT = [
    "'; DELETE FROM recallstack_messages; --",
    '") OR 1=1 --',
    '{"$gt": ""}',
    "$ne",
    "$.a[0] ->> 'b'",
    "ab\u202ecd",  # right-to-left override
    "e\u0301",  # e + combining acute
    "\u00e9",  # the precomposed é: a different string
    "😀 \U0001f9d1\u200d\U0001f33e",  # emoji with a zero-width joiner
    'tab\tnewline\nquote"backslash\\',
]
ODD_KEYS = [
    "a'; DROP TABLE t; --",
    'b") OR 1=1 --',
    "c->>'d'",
    "e[0]",
    "f\u202eg",
    "h\u0301",
    "i j",
    '"',
    "\\",
]


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        node = {"n": node}
    return node


def _deep_filter(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"k": 1}
    for _ in range(levels):
        node = {"$and": [node]}
    return node


REFUSED_FILTERS: list[tuple[str, Any]] = [
    ("NaN value", {"k": float("nan")}),
    ("infinite value", {"k": {"$gt": float("inf")}}),
    ("lone surrogate in a value", {"k": "a\ud800"}),
    ("NUL in a value", {"k": "a\x00"}),
    ("operator-looking key", {"$where": "sleep(1)"}),
    ("key with an operator part", {"a.$gt": 1}),
    ("nested 100 deep", _deep_filter(100)),
    ("5,000 conditions", {"$or": [{"k": i} for i in range(5_000)]}),
    ("a string, not an object", "k = 1"),
    ("a list, not an object", [{"k": 1}]),
]

REFUSED_METADATA: list[tuple[str, Any]] = [
    ("NaN", {"k": float("nan")}),
    ("infinity", {"k": float("-inf")}),
    ("lone surrogate", {"k": "\udfff"}),
    ("NUL", {"k": "a\x00b"}),
    ("NUL in a key", {"a\x00": 1}),
    ("bytes", {"k": b"raw"}),
    ("a set", {"k": {1, 2}}),
    ("nested 100 deep", _deep(100)),
    ("operator key", {"$set": {"k": 1}}),
    ("dotted key", {"a.b": 1}),
]

WRONG_TYPES: list[tuple[str, Callable[[Any, str], Any]]] = [
    ("index name not a string", lambda s, n: s.query(7, [1, 0, 0], 1, partition=EVERYWHERE)),
    ("top_k a string", lambda s, n: s.query(n, [1, 0, 0], "5", partition=EVERYWHERE)),
    ("top_k a bool", lambda s, n: s.query(n, [1, 0, 0], True, partition=EVERYWHERE)),
    ("top_k a float", lambda s, n: s.query(n, [1, 0, 0], 2.0, partition=EVERYWHERE)),
    ("vector None", lambda s, n: s.query(n, None, 1, partition=EVERYWHERE)),
    ("vector of strings", lambda s, n: s.query(n, ["a", "b", "c"], 1, partition=EVERYWHERE)),
    (
        "min_score a string",
        lambda s, n: s.query(n, [1, 0, 0], 1, min_score="0.5", partition=EVERYWHERE),
    ),
    ("ids one string", lambda s, n: s.upsert(n, "abc", [[1, 0, 0]] * 3, partition=EVERYWHERE)),
    ("an id not a string", lambda s, n: s.upsert(n, [7], [[1, 0, 0]], partition=EVERYWHERE)),
    (
        "metadata not a list",
        lambda s, n: s.upsert(n, ["x"], [[1, 0, 0]], {"k": 1}, partition=EVERYWHERE),
    ),
    (
        "metadata item not an object",
        lambda s, n: s.upsert(n, ["x"], [[1, 0, 0]], ["k"], partition=EVERYWHERE),
    ),
    ("delete ids one string", lambda s, n: s.delete(n, ids="a", partition=EVERYWHERE)),
    (
        "delete with ids and filter",
        lambda s, n: s.delete(n, ids=["a"], filter={"k": 1}, partition=EVERYWHERE),
    ),
    (
        "update id not a string",
        lambda s, n: s.update(n, id=7, metadata={"k": 3}, partition=EVERYWHERE),
    ),
    ("dimension a string", lambda s, n: s.create_index(n + "_x", "3")),
]


@pytest.fixture
def seeded(twin: Twin) -> str:
    name = twin.index(3)
    twin.upsert(
        name,
        ["a", "b", "c"],
        [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
        [{"k": 1, "s": "plain"}, {"k": 2, "s": ODD_TEXT[0]}, {"k": 3, ODD_KEYS[0]: "x"}],
    )
    return name


def _snapshot(twin: Twin, name: str) -> list[Any]:
    return twin.store.query(name, [1.0, 1.0, 1.0], 10, include_vector=True, partition=EVERYWHERE)


@pytest.mark.parametrize(("case", "filter"), REFUSED_FILTERS, ids=[c[0] for c in REFUSED_FILTERS])
def test_hostile_filters_are_refused(twin: Twin, seeded: str, case: str, filter: Any) -> None:
    before = _snapshot(twin, seeded)
    with pytest.raises((FilterError, InvalidInputError)):
        twin.store.query(seeded, [1.0, 0.0, 0.0], 3, filter=filter, partition=EVERYWHERE)
    with pytest.raises((FilterError, InvalidInputError)):
        twin.store.delete(seeded, filter=filter, partition=EVERYWHERE)
    assert _snapshot(twin, seeded) == before


@pytest.mark.parametrize(
    ("case", "metadata"), REFUSED_METADATA, ids=[c[0] for c in REFUSED_METADATA]
)
def test_hostile_metadata_is_refused_before_any_write(
    twin: Twin, seeded: str, case: str, metadata: Any
) -> None:
    before = _snapshot(twin, seeded)
    with pytest.raises(InvalidInputError):
        twin.store.upsert(
            seeded, ["new", "a"], [[1, 1, 0], [0, 1, 1]], [{"k": 9}, metadata], partition=EVERYWHERE
        )
    with pytest.raises(InvalidInputError):
        twin.store.update(seeded, id="a", metadata=metadata, partition=EVERYWHERE)
    assert _snapshot(twin, seeded) == before


@pytest.mark.parametrize(("case", "call"), WRONG_TYPES, ids=[c[0] for c in WRONG_TYPES])
def test_wrong_types_are_refused(twin: Twin, seeded: str, case: str, call: Any) -> None:
    before = _snapshot(twin, seeded)
    with pytest.raises(InvalidInputError):
        call(twin.store, seeded)
    assert _snapshot(twin, seeded) == before


@pytest.mark.parametrize("text", ODD_TEXT)
def test_odd_text_is_stored_and_matched_as_given(twin: Twin, seeded: str, text: str) -> None:
    """Values and keys that look like SQL, JSON paths, operators or odd Unicode are data:
    stored as given and matched exactly, as the reference matches them."""
    key = ODD_KEYS[len(text) % len(ODD_KEYS)]
    twin.upsert(seeded, ["odd"], [[1, 1, 1]], [{"s": text, key: text, "list": [text, "x"]}])
    for filter in (
        {"s": text},
        {key: text},
        {"list": text},
        {"s": {"$in": [text, "plain"]}},
        {"s": {"$ne": text}},
        {"s": {"$nin": [text]}},
    ):
        twin.check_filter(seeded, [1.0, 1.0, 0.0], 10, filter)
    (hit,) = twin.query(seeded, [1.0, 1.0, 1.0], 1, filter={"s": text})
    assert hit.metadata == {"s": text, key: text, "list": [text, "x"]}


def test_datetimes_in_metadata_become_epoch_milliseconds(twin: Twin, seeded: str) -> None:
    when = datetime(2024, 5, 1, 12, tzinfo=UTC)
    twin.upsert(seeded, ["dated"], [[1, 1, 0]], [{"at": when}])
    (hit,) = twin.query(seeded, [1.0, 1.0, 0.0], 1, filter={"at": {"$gte": when}})
    assert hit.metadata == {"at": 1_714_564_800_000}


# ---- storages -----------------------------------------------------------------------


def test_odd_and_large_messages_round_trip(storage: Storage, ids: Any) -> None:
    thread = ids("hostile")
    storage.save_thread(Thread(id=thread, resource_id=ids("r"), metadata={ODD_KEYS[0]: "x"}))
    megabyte = ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000]
    messages = [
        Message(
            id=f"{thread}-{n}",
            thread_id=thread,
            role="user",
            content=text,
            metadata={key: text for key in ODD_KEYS},
        )
        for n, text in enumerate([*ODD_TEXT, megabyte])
    ]
    storage.save_messages(messages)
    stored = {m.id: m for m in storage.get_messages([m.id for m in messages])}
    for m in messages:
        assert (stored[m.id].text, stored[m.id].metadata) == (m.text, m.metadata)
    thread_back = storage.get_thread(thread)
    assert thread_back is not None and thread_back.metadata == {ODD_KEYS[0]: "x"}
