"""recallstack as a Pydantic AI agent's long-term memory: a run is saved, and a later
run in another thread gets what the memory recalls for its prompt, and can search
the memory with a tool. Offline: LibSQL in a temporary file, the hash embedder, and
a `FunctionModel` standing in for the LLM (it prints what it is sent).

    pip install "recallstack[pydantic-ai,libsql]"
    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from recallstack import AsyncMemory
from recallstack.integrations.pydantic_ai import memory_search_tool, recall_history, save_run


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for the LLM: shows its last request, searches the memory once."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        print(f"  model is sent ({part.part_kind}): {part.content}")
    if info.function_tools and last.parts[-1].part_kind == "user-prompt":
        return ModelResponse(parts=[ToolCallPart("search_memory", {"query": "sourdough"})])
    return ModelResponse(parts=[TextPart("Noted.")])


async def main(folder: str) -> None:
    url = f"libsql:///{Path(folder) / 'memory.db'}"
    async with AsyncMemory(url, url, "hash/256", {"semantic_recall": {"top_k": 2}}) as memory:
        print("run 1, thread 'monday':")
        first = await Agent(FunctionModel(model)).run(
            "I'm vegetarian, and my sourdough starter is called Bob"
        )
        await save_run(memory, first.new_messages(), thread_id="monday", resource_id="maya")

        print("run 2, thread 'friday':")
        agent = Agent(
            FunctionModel(model),
            capabilities=[recall_history(memory, thread_id="friday", resource_id="maya")],
            tools=[memory_search_tool(memory, resource_id="maya")],
        )
        await agent.run("Suggest a vegetarian dinner")


with tempfile.TemporaryDirectory() as folder:
    asyncio.run(main(folder))
