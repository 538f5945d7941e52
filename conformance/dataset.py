"""Data the cases share: awkward metadata documents and deterministic vectors."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

AWKWARD_KEY = "it's a \"key\" -- with ) punctuation; DROP TABLE x; $[0] [*] ->> '{a}'"

DOCS: list[dict[str, Any]] = [
    {"n": 5, "s": "b", "tag": "x", "flag": True},
    {"n": 5.0, "s": "B", "tag": "y", "flag": False},
    {"n": 2.5, "s": "a", "tags": ["x", "y"]},
    {"n": -1, "s": "é", "tags": ["z"], "nested": {"depth": 1, "name": "a"}},
    {"n": "5", "s": "", "nested": {"depth": 2, "name": "b"}},
    {"n": True, "s": "aa", "nested": {"depth": 3}},
    {"n": None, "s": None},
    {"n": [1, 7, "x"], "tags": []},
    {"other": 1},
    {AWKWARD_KEY: "'; DROP TABLE x; --", "n": 0},
    {"n": 1, "s": '{"$gt": 1}', "tag": "$ne"},
    {"n": 1.5, "s": "z", "tag": "x", "nested": {"depth": 2.0, "name": None}},
    {"n": [None], "tags": [None, "x"], "nested": {}},
]

FILTERS: list[dict[str, Any]] = [
    {"n": 5},
    {"n": {"$eq": 5.0}},
    {"n": "5"},
    {"n": True},
    {"n": 1},
    {"n": None},
    {"n": "x"},
    {"tags": "x"},
    {"s": "B"},
    {"n": {"$ne": 5}},
    {"n": {"$ne": None}},
    {"tags": {"$ne": "x"}},
    {"flag": {"$ne": True}},
    {"n": {"$gt": 2.5}},
    {"n": {"$gte": 2.5}},
    {"n": {"$lt": 1.5}},
    {"n": {"$lte": 1}},
    {"n": {"$gt": 0, "$lt": 6}},
    {"s": {"$gt": "a"}},
    {"s": {"$gte": "B"}},
    {"s": {"$lt": "b"}},
    {"s": {"$lte": ""}},
    {"n": {"$gte": "5"}},
    {"n": {"$in": [5, "5", None]}},
    {"n": {"$in": []}},
    {"tags": {"$in": ["z", "q"]}},
    {"n": {"$nin": [5, "x"]}},
    {"n": {"$nin": []}},
    {"tags": {"$nin": ["x"]}},
    {"$and": [{"n": {"$gte": 1}}, {"tag": "x"}]},
    {"$or": [{"s": "a"}, {"tag": "y"}, {"n": None}]},
    {"$or": [{"$and": [{"n": {"$gt": 0}}, {"s": {"$lt": "b"}}]}, {"tags": "z"}]},
    {"n": 5, "flag": True},
    {"nested.depth": 2},
    {"nested.depth": {"$gte": 2}},
    {"nested.name": None},
    {"nested.name": {"$in": ["a", "b"]}},
    {AWKWARD_KEY: "'; DROP TABLE x; --"},
    {"s": '{"$gt": 1}'},
    {"tag": "$ne"},
    {"s": "' OR 1=1 --"},
    # extended operators
    {"n": {"$exists": True}},
    {"nested.depth": {"$exists": False}},
    {"tags": {"$exists": True}},
    {"tags": {"$exists": False}},
    {"s": {"$exists": False}},
    {"nested": {"$exists": True}},
    {"nested.name": {"$exists": True}},
    {"tags": None},
    {"tags": {"$ne": None}},
    {"n": {"$not": {"$gt": 2}}},
    {"tags": {"$not": {"$in": ["x"]}}},
    {"$nor": [{"n": 5}, {"s": None}]},
    {"tags": {"$all": ["x", "y"]}},
    {"tags": {"$all": ["x"]}},
]


def vectors(count: int, dimension: int, seed: int = 7) -> npt.NDArray[np.float32]:
    """Deterministic random vectors (rows never zero)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(count, dimension)).astype(np.float32)
