"""recallstack.integrations.openai_agents with the real OpenAI Agents SDK: the
`Session` contract (items round-trip in order, `limit`, `pop_item`, `clear_session`,
sessions kept apart), at real sizes, and a `Runner` run by a scripted model: history
carried between turns, recall added for a new turn and never saved, and the
memory-search tool. On LibSQL and Postgres, with the hash embedder. Run by
`nox -s integration-openai-agents`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    Agent,
    Model,
    ModelResponse,
    RunConfig,
    Runner,
    Session,
    TResponseInputItem,
    Usage,
    set_tracing_disabled,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from recallstack import AsyncMemory, Message
from recallstack.core.errors import InvalidInputError
from recallstack.integrations.openai_agents import RecallstackSession, memory_search_tool
from recallstack.integrations.recalled import NOTE

set_tracing_disabled(True)  # offline: no trace export


def user(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


ITEMS: list[Any] = [
    {"role": "user", "content": "What's the weather in Kyoto?"},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Kyoto"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21°C"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny and 21°C.", "annotations": []}],
    },
    {"role": "developer", "content": "Answer briefly."},
]


def test_it_is_the_sdks_session(memory: AsyncMemory) -> None:
    assert isinstance(RecallstackSession(memory, "s", resource_id="maya"), Session)


async def test_items_round_trip_in_order(memory: AsyncMemory) -> None:
    session = RecallstackSession(memory, "s", resource_id="maya")
    assert await session.get_items() == []
    await session.add_items(ITEMS[:3])
    await session.add_items(ITEMS[3:])
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=2) == ITEMS[-2:]
    assert await session.get_items(limit=0) == []
    page = await memory.recall("s", "maya", per_page=10)
    assert [m.role for m in page.messages] == ["user", "assistant", "tool", "assistant", "system"]
    assert page.messages[3].text == "Sunny and 21°C."  # what is embedded and searched


async def test_pop_and_clear(memory: AsyncMemory) -> None:
    session = RecallstackSession(memory, "s", resource_id="maya")
    assert await session.pop_item() is None
    await session.add_items([user("one"), user("two")])
    assert await session.pop_item() == user("two")
    assert await session.get_items() == [user("one")]
    await session.clear_session()
    assert await session.get_items() == []
    assert await memory.get_thread("s") is None
    await session.clear_session()  # nothing to clear
    await session.add_items([user("again")])
    assert await session.get_items() == [user("again")]


async def test_sessions_are_kept_apart(memory: AsyncMemory) -> None:
    """Four sessions (two users) written at once, in batches, stay in their own order."""
    owners = {"a": "maya", "b": "maya", "c": "sam", "d": "sam"}
    sessions = {s: RecallstackSession(memory, s, resource_id=r) for s, r in owners.items()}

    async def write(name: str) -> None:
        for batch in range(5):
            await sessions[name].add_items([user(f"{name} {batch * 60 + n}") for n in range(60)])

    await asyncio.gather(*(write(name) for name in sessions))
    for name, session in sessions.items():
        assert await session.get_items() == [user(f"{name} {n}") for n in range(300)]


async def test_another_resources_thread_is_refused(memory: AsyncMemory) -> None:
    await RecallstackSession(memory, "s", resource_id="maya").add_items([user("mine")])
    intruder = RecallstackSession(memory, "s", resource_id="sam")
    for attempt in (
        intruder.get_items(),
        intruder.add_items([user("x")]),
        intruder.pop_item(),
        intruder.clear_session(),
    ):
        with pytest.raises(InvalidInputError, match="another resource"):
            await attempt
    assert await RecallstackSession(memory, "s", resource_id="maya").get_items() == [user("mine")]


async def test_bad_input_is_refused_before_anything_is_written(memory: AsyncMemory) -> None:
    with pytest.raises(InvalidInputError, match="session_id"):
        RecallstackSession(memory, 7, resource_id="maya")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="AsyncMemory"):
        RecallstackSession("libsql:///m.db", "s", resource_id="maya")  # type: ignore[arg-type]
    session = RecallstackSession(memory, "s", resource_id="maya")
    await session.add_items([user("kept")])
    with pytest.raises(InvalidInputError):
        await session.add_items([user("fine"), {"role": "user", "content": float("nan")}])  # type: ignore[list-item]
    assert await session.get_items() == [user("kept")]


async def test_messages_saved_otherwise_are_read_as_items(memory: AsyncMemory) -> None:
    await memory.create_thread("maya", thread_id="s")
    await memory.save_messages([Message(thread_id="s", role="user", content="saved by Memory")])
    session = RecallstackSession(memory, "s", resource_id="maya")
    assert await session.get_items() == [{"role": "user", "content": "saved by Memory"}]


async def test_a_long_session(memory: AsyncMemory) -> None:
    session = RecallstackSession(memory, "long", resource_id="maya")
    items = [user(f"message number {n}") for n in range(2500)]
    await session.add_items(items)
    assert await session.get_items() == items  # read in pages of 1,000
    assert await session.get_items(limit=1200) == items[-1200:]


class ScriptedModel(Model):
    """Stands in for the LLM: answers from a script, calling a tool where it says
    `("call", name, arguments)`, and keeps every input it is sent."""

    def __init__(self, *script: str | tuple[str, str, dict[str, Any]]) -> None:
        self.script = list(script)
        self.sent: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.sent.append([user(input)] if isinstance(input, str) else list(input))
        step = self.script.pop(0)
        if isinstance(step, tuple):
            _, name, arguments = step
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_{len(self.sent)}",
                name=name,
                arguments=json.dumps(arguments),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=step, annotations=[])
        message = ResponseOutputMessage(
            type="message",
            id=f"msg_{len(self.sent)}",
            role="assistant",
            status="completed",
            content=[text],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("these tests do not stream")


def notes(sent: list[Any]) -> list[str]:
    return [
        i["content"] for i in sent if i.get("role") == "system" and NOTE in str(i.get("content"))
    ]


async def test_a_runner_keeps_its_conversation_in_the_session(memory: AsyncMemory) -> None:
    model = ScriptedModel("Hello Maya.", "You said your name is Maya.")
    agent = Agent(name="assistant", model=model)
    session = RecallstackSession(memory, "chat", resource_id="maya")
    await Runner.run(agent, "My name is Maya", session=session)
    result = await Runner.run(agent, "What is my name?", session=session)
    assert result.final_output == "You said your name is Maya."
    assert model.sent[1][0] == user("My name is Maya")  # the first turn, from the session
    assert [i.get("role") for i in await session.get_items()] == ["user", "assistant"] * 2


async def test_a_new_turn_gets_what_the_memory_recalls(memory: AsyncMemory) -> None:
    await memory.create_thread("maya", thread_id="trip")
    texts = ["I am vegetarian, no fish either", "We land in Kyoto on May 3", "Bob is my cat"]
    await memory.save_messages([Message(thread_id="trip", role="user", content=t) for t in texts])
    model = ScriptedModel("Noted.", "Noted again.")
    agent = Agent(name="assistant", model=model)
    session = RecallstackSession(memory, "dinner", resource_id="maya")
    config = RunConfig(session_input_callback=session.recall_input)

    await Runner.run(agent, "is she vegetarian, fish or not?", session=session, run_config=config)
    (note,) = notes(model.sent[0])
    assert "user: I am vegetarian, no fish either" in note
    assert "Bob is my cat" not in note

    await Runner.run(agent, "which fish?", session=session, run_config=config)
    (note,) = notes(model.sent[1])  # the first turn's note was not saved
    assert "is she vegetarian" not in note  # in the history already: not recalled again
    stored = await session.get_items()
    assert notes(stored) == []
    assert [i["role"] for i in stored] == ["user", "assistant", "user", "assistant"]


async def test_recall_keeps_to_the_resource(memory: AsyncMemory) -> None:
    await memory.create_thread("maya", thread_id="trip")
    await memory.save_messages([Message(thread_id="trip", role="user", content="I am vegetarian")])
    model = ScriptedModel("ok")
    session = RecallstackSession(memory, "other", resource_id="sam")
    config = RunConfig(session_input_callback=session.recall_input)
    await Runner.run(
        Agent(name="a", model=model), "vegetarian?", session=session, run_config=config
    )
    assert notes(model.sent[0]) == []


async def test_the_agent_searches_the_memory_with_the_tool(memory: AsyncMemory) -> None:
    await memory.create_thread("maya", thread_id="pets")
    await memory.save_messages([Message(thread_id="pets", role="user", content="Bob is my cat")])
    model = ScriptedModel(("call", "search_memory", {"query": "cat name"}), "Your cat is Bob.")
    agent = Agent(name="a", model=model, tools=[memory_search_tool(memory, resource_id="maya")])
    result = await Runner.run(agent, "what is my cat called?")
    assert result.final_output == "Your cat is Bob."
    (output,) = [i for i in model.sent[1] if i.get("type") == "function_call_output"]
    assert "user: Bob is my cat" in output["output"]
