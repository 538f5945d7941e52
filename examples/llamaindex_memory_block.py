"""recallstack as a LlamaIndex memory block: what LlamaIndex's `Memory` flushes from
one session is saved to recallstack, and a later session of the same user gets what
is relevant to the newest message in its system message. Offline: LibSQL in a
temporary file and the hash embedder (no LLM is needed to build the messages).

    pip install "recallstack[llamaindex,libsql]"
    python examples/llamaindex_memory_block.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from recallstack import AsyncMemory
from recallstack.integrations.llamaindex import RecallstackMemoryBlock


def llama_memory(memory: AsyncMemory, session_id: str) -> Memory:
    return Memory.from_defaults(
        session_id=session_id,
        token_limit=40,  # a tiny short-term window, so that the first session flushes
        token_flush_size=10,
        tokenizer_fn=str.split,
        memory_blocks=[RecallstackMemoryBlock(memory=memory, resource_id="maya")],
    )


async def main(folder: str) -> None:
    url = f"libsql:///{Path(folder) / 'memory.db'}"
    async with AsyncMemory(url, url, "hash/256", {"semantic_recall": {"top_k": 2}}) as memory:
        monday = llama_memory(memory, "monday")
        await monday.aput_messages(
            [
                ChatMessage(role="user", content="I'm vegetarian, and I bake sourdough"),
                ChatMessage(role="assistant", content="Noted: vegetarian, a sourdough baker."),
                ChatMessage(role="user", content="My starter is called Bob"),
                ChatMessage(role="assistant", content="Hello to Bob, then."),
                ChatMessage(role="user", content="We fly to Kyoto in May"),
                ChatMessage(role="assistant", content="Kyoto in May is lovely."),
            ]
        )
        friday = llama_memory(memory, "friday")
        for message in await friday.aget(input="Suggest a vegetarian dinner"):
            print(f"{message.role.value}: {message.content}")


with tempfile.TemporaryDirectory() as folder:
    asyncio.run(main(folder))
