"""LlamaIndex: `RecallstackMemoryBlock`, a memory block (`BaseMemoryBlock`) for
LlamaIndex's `Memory`. On each turn it recalls from recallstack what is relevant to the
user's newest message; the messages `Memory` flushes out of its short-term window are
saved to recallstack, one thread per `Memory` session, so later sessions of the same
user find them.

Needs the `llamaindex` extra (llama-index-core). Works on an `AsyncMemory`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from recallstack.integrations import async_memory, missing

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
    from llama_index.core.bridge.pydantic import ConfigDict, Field
    from llama_index.core.memory.memory import BaseMemoryBlock
except ImportError as exc:
    raise missing("llamaindex", exc, "llamaindex") from exc

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.errors import InvalidInputError
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message, Role, utc_now
from recallstack.integrations.recalled import note
from recallstack.integrations.threads import own_thread

_ROLES: dict[str, Role] = {
    MessageRole.USER.value: "user",
    MessageRole.ASSISTANT.value: "assistant",
    MessageRole.SYSTEM.value: "system",
    MessageRole.DEVELOPER.value: "system",
    MessageRole.TOOL.value: "tool",
    MessageRole.FUNCTION.value: "tool",
}


class RecallstackMemoryBlock(BaseMemoryBlock[str]):
    """Recalls for the newest user message from `resource_id`'s memory (its semantic
    recall options: scope, `top_k`, neighbours) and keeps what `Memory` flushes."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="recalled_messages", description="The block's name.")
    memory: AsyncMemory = Field(description="The recallstack memory to recall from and save to.")
    resource_id: str = Field(description="The user (or agent) whose memory this is.")

    def __init__(self, *, memory: AsyncMemory, resource_id: str, **fields: Any) -> None:
        fields.update(memory=async_memory(memory), resource_id=check_id(resource_id, "resource_id"))
        super().__init__(**fields)

    async def _aget(
        self,
        messages: list[ChatMessage] | None = None,
        session_id: str | None = None,
        **block_kwargs: Any,
    ) -> str:
        """What the memory recalls for the newest user message, or "" for nothing."""
        query = next(
            (t for m in reversed(messages or []) if m.role == MessageRole.USER and (t := _text(m))),
            None,
        )
        if query is None or session_id is None:
            return ""
        found = await self.memory.recall(
            session_id, self.resource_id, vector_search_string=query, per_page=0
        )
        return note(found.messages) or ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Saves messages that have text, in order, to the thread of their session."""
        saved: list[Message] = []
        start = utc_now()
        for n, message in enumerate(messages):
            session_id = message.additional_kwargs.get("session_id")
            if session_id is None:
                raise InvalidInputError(
                    f"messages[{n}] has no session_id: put it through LlamaIndex's Memory"
                )
            text = _text(message)
            if text:
                saved.append(
                    Message(
                        thread_id=check_id(session_id, f"messages[{n}] session_id"),
                        resource_id=self.resource_id,
                        role=_ROLES.get(message.role.value, "assistant"),
                        content=text,
                        created_at=start + dt.timedelta(microseconds=n),
                    )
                )
        for thread_id in dict.fromkeys(m.thread_id for m in saved):
            await own_thread(self.memory, thread_id, self.resource_id, create=True)
        if saved:
            await self.memory.save_messages(saved)


def _text(message: ChatMessage) -> str:
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock)).strip()
