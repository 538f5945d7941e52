"""Models and configuration: defaults, validation, text, OpenAI conversions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from recallstack.core.contracts.embedder import index_name
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from recallstack.core.records import Thread
from recallstack.core.runtime.config import MemoryConfig, MessageRange, SemanticRecallConfig
from recallstack.core.vectors import IndexConfig, QueryResult, trusted_hit


def test_text_joins_text_parts() -> None:
    m = Message(
        thread_id="t",
        role="assistant",
        content=[
            TextPart(text="first"),
            ToolCallPart(id="c1", name="lookup", arguments={"q": 1}),
            TextPart(text="second"),
        ],
    )
    assert m.text == "first\nsecond"
    assert Message(thread_id="t", role="user", content="plain").text == "plain"


def test_times_are_utc() -> None:
    paris = datetime(2024, 1, 15, 11, 30, tzinfo=timezone(timedelta(hours=1)))
    m = Message(thread_id="t", role="user", content="x", created_at=paris)
    assert m.created_at == datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    assert m.created_at.tzinfo == UTC
    naive = Thread(id="t", resource_id="r", created_at=datetime(2024, 1, 1))
    assert naive.created_at.tzinfo == UTC


def test_bad_messages_are_refused() -> None:
    """One of recallstack's errors, naming the model and field; never pydantic's."""
    with pytest.raises(InvalidInputError, match=r"Message\.role"):
        Message(thread_id="t", role="robot", content="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"Message\.thread_id"):
        Message(thread_id="", role="user", content="x")


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"thread_id": {"$ne": "x"}}, "thread_id"),  # would become a filter operator
        ({"thread_id": 7}, "thread_id"),
        ({"resource_id": ["r"]}, "resource_id"),
        ({"id": "x" * 513}, "id"),
        ({"id": "a\x00b"}, "id"),
        ({"content": "lone \ud800 surrogate"}, "content"),
        ({"content": "a NUL \x00"}, "content"),
        ({"metadata": {"when": datetime(2024, 1, 1)}}, "metadata"),
        ({"metadata": {"raw": b"bytes"}}, "metadata"),
        ({"metadata": {"tags": {"a", "b"}}}, "metadata"),
        ({"metadata": {"x": float("nan")}}, "metadata"),
        ({"metadata": {"x": "a\x00"}}, "metadata"),
        ({"metadata": {1: "int key"}}, "metadata"),
    ],
)
def test_hostile_message_fields_are_refused(fields: dict[str, object], where: str) -> None:
    data: dict[str, object] = {"thread_id": "t", "role": "user", "content": "x", **fields}
    with pytest.raises(InvalidInputError, match=rf"Message\.{where}"):
        Message.model_validate(data)


def test_metadata_depth_is_bounded() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(40):
        node["n"] = {}
        node = node["n"]  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="deeper than 32"):
        Thread(id="t", resource_id="r", metadata=deep)


def test_openai_round_trip() -> None:
    user = Message.from_openai({"role": "user", "content": "hi"}, thread_id="t", resource_id="r")
    assert (user.role, user.content, user.resource_id) == ("user", "hi", "r")
    assert user.to_openai() == {"role": "user", "content": "hi"}

    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
        ],
    }
    m = Message.from_openai(call, thread_id="t")
    assert m.content == [ToolCallPart(id="c1", name="f", arguments={"x": 1})]
    assert m.to_openai() == call

    tool = Message.from_openai(
        {"role": "tool", "tool_call_id": "c1", "content": "42"}, thread_id="t"
    )
    assert tool.content == [ToolResultPart(tool_call_id="c1", result="42")]
    assert tool.to_openai() == {"role": "tool", "content": "42", "tool_call_id": "c1"}

    parts = Message.from_openai(
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        thread_id="t",
    )
    assert parts.text == "a\nb"


def test_openai_bad_tool_arguments() -> None:
    bad = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{oops"}}],
    }
    with pytest.raises(InvalidInputError, match="'c1'"):
        Message.from_openai(bad, thread_id="t")


def test_defaults() -> None:
    config = MemoryConfig()
    assert config.last_messages == 10
    assert config.semantic_recall is False
    recall = MemoryConfig(semantic_recall=True).semantic_recall
    assert recall == SemanticRecallConfig()
    assert isinstance(recall, SemanticRecallConfig)
    assert (recall.top_k, recall.scope, recall.threshold) == (4, "resource", None)
    assert recall.message_range == MessageRange(before=1, after=1)
    assert recall.index_config == IndexConfig(
        type=None, metric="cosine", m=16, ef_construction=64, lists=100
    )


def test_message_range_forms() -> None:
    assert SemanticRecallConfig(message_range=3).message_range == MessageRange(before=3, after=3)
    assert SemanticRecallConfig(
        message_range={"before": 0, "after": 2}
    ).message_range == MessageRange(before=0, after=2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"top_k": 0},
        {"message_range": -1},
        {"message_range": True},
        {"scope": "world"},
        {"index_name": ""},
        {"index_config": {"metric": "manhattan"}},
        {"unknown": 1},
    ],
)
def test_bad_recall_config(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError, match="SemanticRecallConfig"):
        SemanticRecallConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"top_k": True}, "SemanticRecallConfig.top_k"),
        ({"chunk_overlap": False}, "SemanticRecallConfig.chunk_overlap"),
        ({"message_range": {"before": True}}, "MessageRange.before"),
        ({"hybrid": {"context": True}}, "HybridConfig.context"),
        ({"hybrid": {"candidates": True}}, "HybridConfig.candidates"),
        ({"hybrid": {"rrf_k": True}}, "HybridConfig.rrf_k"),
        ({"index_config": {"m": True}}, "IndexConfig.m"),
    ],
)
def test_a_bool_is_no_count(options: dict[str, Any], field: str) -> None:
    """pydantic takes True for 1; an option that counts refuses it and names itself."""
    with pytest.raises(InvalidInputError, match=rf"{field}: must be an integer, not a bool"):
        SemanticRecallConfig(**options)


def test_recall_filter_is_checked_up_front() -> None:
    with pytest.raises(
        InvalidInputError, match=r"unknown operator \$bad \(at filter\.topic\.\$bad\)"
    ):
        SemanticRecallConfig(filter={"topic": {"$bad": 1}})


def test_bad_history_config() -> None:
    with pytest.raises(InvalidInputError, match="last_messages"):
        MemoryConfig(last_messages=-1)
    assert MemoryConfig(last_messages=False).last_messages is False


def test_per_call_config_deep_merges() -> None:
    base = MemoryConfig(
        semantic_recall={"top_k": 7, "scope": "thread", "filter": {"a": 1}, "message_range": 2}
    )
    merged = base.merged({"semantic_recall": {"top_k": 2, "message_range": {"after": 0}}})
    assert isinstance(merged.semantic_recall, SemanticRecallConfig)
    assert merged.semantic_recall.top_k == 2
    assert merged.semantic_recall.scope == "thread"
    assert merged.semantic_recall.message_range == MessageRange(before=2, after=0)
    assert merged.semantic_recall.filter == {"a": 1}
    replaced = base.merged({"semantic_recall": {"filter": {"b": 2}}})
    assert isinstance(replaced.semantic_recall, SemanticRecallConfig)
    assert replaced.semantic_recall.filter == {"b": 2}
    assert base.merged({"semantic_recall": True}) == base
    enabled = MemoryConfig().merged({"semantic_recall": {"top_k": 1}})
    assert isinstance(enabled.semantic_recall, SemanticRecallConfig)
    assert enabled.semantic_recall.top_k == 1
    assert MemoryConfig().merged({"semantic_recall": False}).semantic_recall is False


@pytest.mark.parametrize(
    ("model", "dimension", "expected"),
    [
        ("all-MiniLM-L6-v2", 384, "memory_messages_all_minilm_l6_v2_384"),
        (
            "openai/text-embedding-3-small",
            1536,
            "memory_messages_openai_text_embedding_3_small_1536",
        ),
        ("text-embedding-3-small", 512, "memory_messages_text_embedding_3_small_512"),
        ("A..B", 8, "memory_messages_a_b_8"),
    ],
)
def test_index_name(model: str, dimension: int, expected: str) -> None:
    assert index_name(model, dimension) == expected


def test_a_trusted_hit_is_a_whole_query_result() -> None:
    """The unvalidated fast constructor must give what validation gives (pydantic internals)."""
    fast = trusted_hit("a", 0.5, {"k": [1, 2]}, [0.1, 0.2])
    slow = QueryResult(id="a", score=0.5, metadata={"k": [1, 2]}, vector=[0.1, 0.2])
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_copy(update={"score": 1.0}).score == 1.0
    with pytest.raises(ValidationError):
        fast.score = 2.0  # frozen, like every QueryResult


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"x": b"\xff\xfe"}, "bytes is not JSON"),
        ({"x": object()}, "object is not JSON"),
        (_nested(100_000), "nested deeper than 32"),
        ({"x": float("nan")}, "nan is not a finite number"),
        ({"x": float("inf")}, "inf is not a finite number"),
        ({"x": "a\x00b"}, "NUL characters are not allowed"),
        ({"x": "\ud800"}, "lone surrogate"),
    ],
)
def test_tool_calls_and_results_are_json_as_metadata_is(value: Any, why: str) -> None:
    """Tool-call arguments and tool results go through the metadata's checks: one
    policy for NaN, NUL and depth on every backend, an error naming the field."""
    with pytest.raises(InvalidInputError, match=f"tool call arguments.*{why}"):
        ToolCallPart(id="c1", name="lookup", arguments=value)
    with pytest.raises(InvalidInputError, match=f"tool result.*{why}"):
        Message(
            thread_id="t",
            role="tool",
            content=[{"type": "tool_result", "tool_call_id": "c1", "result": value}],
        )


def test_tool_call_ids_and_names_are_text() -> None:
    with pytest.raises(InvalidInputError, match=r"ToolCallPart\.name: text: NUL"):
        ToolCallPart(id="c1", name="a\x00")
    with pytest.raises(InvalidInputError, match=r"ToolResultPart\.tool_call_id"):
        ToolResultPart(tool_call_id=b"c1")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"ToolResultPart\.result: tool result: keys must"):
        ToolResultPart(tool_call_id="c1", result={1: "x"})
    good = ToolResultPart(tool_call_id="c1", result={"rows": [1, 2.5, None, "x"]})
    assert good.result == {"rows": [1, 2.5, None, "x"]}
