"""recallstack.integrations.pydantic_ai with a real Pydantic AI `Agent` run by a
`FunctionModel` that records what the model is sent: recall added to the request of
a new user prompt, the memory-search tool called by the model, and a run saved and
then recalled in another thread. On LibSQL and Postgres, with the hash embedder.
Run by `nox -s integration-pydantic_ai`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from recallstack import AsyncMemory, Message
from recallstack.core.errors import InvalidInputError
from recallstack.integrations.pydantic_ai import memory_search_tool, recall_history, save_run
from recallstack.integrations.recalled import NOTE


async def seed(memory: AsyncMemory) -> None:
    await memory.create_thread("maya", thread_id="trip")
    texts = ["I am vegetarian, no fish either", "We land in Kyoto on May 3", "Bob is my cat"]
    await memory.save_messages(
        [Message(thread_id="trip", role="user", content=text) for text in texts]
    )


class Recorder:
    """A model that answers "ok" and keeps every message list it is sent."""

    def __init__(self) -> None:
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(list(messages))
        return ModelResponse(parts=[TextPart("ok")])


def notes(messages: list[ModelMessage]) -> list[str]:
    """The recall notes the model is sent. Pydantic AI sends a system part after the
    first request as a user part framed `<system>...</system>`."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, SystemPromptPart | UserPromptPart)
        and isinstance(part.content, str)
        and NOTE in part.content
    ]


async def test_a_new_prompt_gets_what_the_memory_recalls(memory: AsyncMemory) -> None:
    await seed(memory)
    model = Recorder()
    agent = Agent(
        FunctionModel(model),
        capabilities=[recall_history(memory, thread_id="dinner", resource_id="maya")],
    )
    result = await agent.run("is she vegetarian, fish or not?")
    (note,) = notes(model.sent[0])
    assert "user: I am vegetarian, no fish either" in note
    assert "Bob is my cat" not in note  # top_k 2 of 3: the unrelated one is left out
    assert result.output == "ok"

    await agent.run("where do we land?", message_history=result.all_messages())
    second = notes(model.sent[1])
    assert len(second) == 2  # the first request keeps its note; the new one gets its own
    assert "Kyoto on May 3" in second[1]


async def test_nothing_recalled_leaves_the_request_alone(memory: AsyncMemory) -> None:
    model = Recorder()
    agent = Agent(
        FunctionModel(model),
        capabilities=[recall_history(memory, thread_id="t", resource_id="nobody")],
    )
    await agent.run("hello there")
    assert notes(model.sent[0]) == []


async def test_recall_keeps_to_the_resource(memory: AsyncMemory) -> None:
    await seed(memory)
    model = Recorder()
    agent = Agent(
        FunctionModel(model),
        capabilities=[recall_history(memory, thread_id="other", resource_id="sam")],
    )
    await agent.run("is she vegetarian?")
    assert notes(model.sent[0]) == []


async def test_the_model_searches_the_memory_with_the_tool(memory: AsyncMemory) -> None:
    await seed(memory)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            assert [t.name for t in info.function_tools] == ["search_memory"]
            return ModelResponse(parts=[ToolCallPart("search_memory", {"query": "cat name"})])
        return ModelResponse(parts=[TextPart(" | ".join(returns[0].content))])

    agent = Agent(FunctionModel(model), tools=[memory_search_tool(memory, resource_id="maya")])
    result = await agent.run("what is my cat called?")
    assert result.output.split(" | ")[0].endswith("user: Bob is my cat")


async def test_a_saved_run_is_recalled_in_another_thread(memory: AsyncMemory) -> None:
    agent = Agent(
        FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Noted: oat milk")]))
    )
    result = await agent.run("I only drink oat milk")
    saved = await save_run(memory, result.new_messages(), thread_id="t1", resource_id="maya")
    assert len(saved.messages) == 2
    again = await save_run(memory, result.new_messages(), thread_id="t1", resource_id="maya")
    assert len(again.messages) == 2
    page = await memory.recall("t1", "maya")
    assert [(m.role, m.text) for m in page.messages] == [
        ("user", "I only drink oat milk"),
        ("assistant", "Noted: oat milk"),
    ]

    model = Recorder()
    agent = Agent(
        FunctionModel(model),
        capabilities=[recall_history(memory, thread_id="t2", resource_id="maya")],
    )
    await agent.run("which milk do I drink?")
    assert "I only drink oat milk" in notes(model.sent[0])[0]


async def test_a_thread_of_another_resource_is_refused(memory: AsyncMemory) -> None:
    await seed(memory)
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("x")])))
    result = await agent.run("hi")
    with pytest.raises(InvalidInputError, match="another resource"):
        await save_run(memory, result.new_messages(), thread_id="trip", resource_id="sam")
    page = await memory.recall("trip", "maya")
    assert len(page.messages) == 3


def test_bad_arguments_are_refused(memory: AsyncMemory) -> None:
    with pytest.raises(InvalidInputError, match="AsyncMemory"):
        recall_history("libsql:///m.db", thread_id="t", resource_id="maya")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="resource_id"):
        memory_search_tool(memory, resource_id=7)  # type: ignore[arg-type]


async def test_a_long_run_is_saved_in_one_call(memory: AsyncMemory) -> None:
    """A history of 2,000 requests and responses (4,000 messages) saved at once."""
    at = datetime(2026, 5, 3, tzinfo=UTC)  # every part at the same instant: order must hold
    history: list[ModelMessage] = []
    for n in range(2000):
        prompt = UserPromptPart(f"question {n}", timestamp=at)
        history.append(ModelRequest(parts=[prompt], run_id="long-run", timestamp=at))
        answer = ModelResponse(parts=[TextPart(f"answer {n}")], run_id="long-run", timestamp=at)
        history.append(answer)
    saved = await save_run(memory, history, thread_id="long", resource_id="maya")
    assert len(saved.messages) == 4000 and saved.not_indexed == []
    page = await memory.recall("long", "maya", per_page=4000)
    assert [m.text for m in page.messages][:4] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
    ]


async def test_runs_in_the_history_are_not_recalled_again(memory: AsyncMemory) -> None:
    await seed(memory)  # another thread: "I am vegetarian, no fish either", ...
    answer = ModelResponse(parts=[TextPart("Noted, vegetarian")])
    first = await Agent(FunctionModel(lambda messages, info: answer)).run("vegetarian or not?")
    await save_run(memory, first.new_messages(), thread_id="chat", resource_id="maya")

    model = Recorder()
    agent = Agent(
        FunctionModel(model),
        capabilities=[recall_history(memory, thread_id="chat", resource_id="maya")],
    )
    await agent.run("vegetarian, any fish?", message_history=first.all_messages())
    (sent,) = notes(model.sent[0])
    assert "no fish either" in sent  # from the other thread
    assert "vegetarian or not" not in sent and "Noted, vegetarian" not in sent  # in history


async def test_history_runs_ranked_first_still_leave_top_k_recalled(memory: AsyncMemory) -> None:
    """Saved messages of runs in the history that rank above everything else do not
    use up `top_k` (2 here): the best two from outside the history are recalled."""
    await seed(memory)  # another thread: "I am vegetarian, no fish either", ...
    history: list[ModelMessage] = []
    for n in range(3):
        answer = ModelResponse(parts=[TextPart(f"vegetarian, any fish? noted {n}")])
        run = await Agent(FunctionModel(lambda messages, info, a=answer: a)).run(
            "vegetarian, any fish?", message_history=history
        )
        await save_run(memory, run.new_messages(), thread_id="chat", resource_id="maya")
        history = run.all_messages()

    model = Recorder()
    agent = Agent(
        FunctionModel(model),
        capabilities=[recall_history(memory, thread_id="chat", resource_id="maya")],
    )
    await agent.run("vegetarian, any fish?", message_history=history)
    (sent,) = notes(model.sent[0])
    assert "no fish either" in sent and "noted" not in sent
    lines = [line for line in sent.splitlines() if line.startswith("[")]
    assert len(lines) == 2, sent  # top_k, none of them from the history
