"""recallstack as an OpenAI Agents SDK session: each thread's items are kept in
recallstack, a new turn gets what the user said in earlier threads, and the agent can
search the memory with a tool. Offline: LibSQL in a temporary file, the hash
embedder, and a scripted model standing in for the LLM (it prints what it is sent).

    pip install "recallstack[openai-agents,libsql]"
    python examples/openai_agents_session.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from recallstack import AsyncMemory
from recallstack.integrations.openai_agents import RecallstackSession, memory_search_tool


class ScriptedModel(Model):
    """Stands in for the LLM: shows its input, searches the memory once when it can."""

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        for item in items:
            print(
                f"  model is sent: {item.get('role') or item.get('type')}: "
                f"{item.get('content') or item.get('output') or item.get('arguments')}"
            )
        if tools and items[-1].get("role") == "user":
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id="call_1",
                name="search_memory",
                arguments=json.dumps({"query": "sourdough"}),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="Noted.", annotations=[])
        reply = ResponseOutputMessage(
            type="message", id="msg_1", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[reply], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(folder: str) -> None:
    set_tracing_disabled(True)
    url = f"libsql:///{Path(folder) / 'memory.db'}"
    async with AsyncMemory(url, url, "hash/256", {"semantic_recall": {"top_k": 2}}) as memory:
        print("thread 'monday':")
        monday = RecallstackSession(memory, "monday", resource_id="maya")
        agent = Agent(name="assistant", model=ScriptedModel())
        await Runner.run(agent, "I'm vegetarian; my sourdough starter is Bob", session=monday)

        print("thread 'friday':")
        friday = RecallstackSession(memory, "friday", resource_id="maya")
        agent = Agent(
            name="assistant",
            model=ScriptedModel(),
            tools=[memory_search_tool(memory, resource_id="maya")],
        )
        await Runner.run(
            agent,
            "Suggest a vegetarian dinner",
            session=friday,
            run_config=RunConfig(session_input_callback=friday.recall_input),
        )
        print(f"thread 'friday' holds {len(await friday.get_items())} items")


with tempfile.TemporaryDirectory() as folder:
    asyncio.run(main(folder))
