"""Pydantic AI: what recallstack recalls for each new user prompt, added to the model's
history (`recall_history`, a `ProcessHistory` capability); a tool that searches the
user's memory (`memory_search_tool`); and `save_run`, which keeps a run's conversation.

Needs the `pydantic-ai` extra (pydantic-ai-slim). Works on an `AsyncMemory`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from recallstack.integrations import async_memory, missing

try:
    from pydantic_ai import Tool
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )
except ImportError as exc:
    raise missing("pydantic_ai", exc, "pydantic-ai") from exc

from recallstack.core.async_memory import AsyncMemory
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message, Role, as_utc
from recallstack.core.operations import SaveResult
from recallstack.integrations.recalled import NOTE, memory_search, note
from recallstack.integrations.threads import own_thread


def recall_history(memory: AsyncMemory, *, thread_id: str, resource_id: str) -> ProcessHistory[Any]:
    """A capability for `Agent(capabilities=[...])`: before the model sees a new user
    prompt, what the memory recalls for it (its semantic recall options: scope,
    `top_k`, neighbours) is added to that request as a system part, oldest first.
    Later requests of the same run (after tool calls) are left as they are, and
    messages of runs already in the history (saved by `save_run`) are not recalled."""
    async_memory(memory)
    check_id(thread_id, "thread_id")
    check_id(resource_id, "resource_id")

    async def add_recalled(messages: list[ModelMessage]) -> list[ModelMessage]:
        last = messages[-1] if messages else None
        if not isinstance(last, ModelRequest) or any(_is_note(p) for p in last.parts):
            return messages
        prompts = [p.content for p in last.parts if isinstance(p, UserPromptPart)]
        query = next((p for p in reversed(prompts) if isinstance(p, str) and p.strip()), None)
        if query is None:
            return messages
        found = await memory.recall(thread_id, resource_id, vector_search_string=query, per_page=0)
        in_history = {m.run_id for m in messages if m.run_id}  # saved runs the model has
        text = note([m for m in found.messages if m.id.split(":")[0] not in in_history])
        if text is None:
            return messages
        part = SystemPromptPart(content=text)
        return [*messages[:-1], dataclasses.replace(last, parts=[part, *last.parts])]

    return ProcessHistory(add_recalled)


def memory_search_tool(memory: AsyncMemory, *, resource_id: str, top_k: int = 5) -> Tool[Any]:
    """A tool the model can call to search everything this user said before."""
    return Tool(memory_search(memory, resource_id, top_k), name="search_memory")


async def save_run(
    memory: AsyncMemory, messages: Sequence[ModelMessage], *, thread_id: str, resource_id: str
) -> SaveResult:
    """Keep a run's conversation (`result.new_messages()`): each user prompt and each
    response's text becomes a message of the thread, which is made if need be. System
    parts, tool calls and tool returns are not kept; saving a run again replaces it
    (a message's id is `<run id>:<position>`)."""
    async_memory(memory)
    said: list[tuple[str, Role, str, datetime]] = []  # (id, role, text, when)
    for n, message in enumerate(messages):
        stem = f"{message.run_id or uuid.uuid4()}:{n}"
        if isinstance(message, ModelRequest):
            said += [
                (f"{stem}:{k}", "user", part.content, part.timestamp)
                for k, part in enumerate(message.parts)
                if isinstance(part, UserPromptPart) and isinstance(part.content, str)
            ]
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                said.append((stem, "assistant", text, message.timestamp))
    kept: list[Message] = []
    for id_, role, text, when in said:  # in the run's order, even where timestamps tie
        at = as_utc(when) if not kept else max(as_utc(when), kept[-1].created_at + _TICK)
        kept.append(
            Message(
                id=id_,
                thread_id=thread_id,
                resource_id=resource_id,
                role=role,
                content=text,
                created_at=at,
            )
        )
    await own_thread(memory, check_id(thread_id, "thread_id"), resource_id, create=True)
    return await memory.save_messages(kept)


_TICK = timedelta(microseconds=1)


def _is_note(part: object) -> bool:
    return isinstance(part, SystemPromptPart) and part.content.startswith(NOTE)
