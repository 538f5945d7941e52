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

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.api.operations import RecallResult, SaveResult
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message, Role, as_utc
from recallstack.core.runtime.config import MessageRange
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
        in_history = {m.run_id for m in messages if m.run_id}  # saved runs the model has
        config = memory.config.recall_or_default
        # their saved messages may rank first: ask for as many more hits as they can
        # number (save_run keeps at most one per part), keep the best top_k of the rest
        room = sum(len(m.parts) for m in messages if m.run_id in in_history)
        most = memory.semantic.vector.capabilities.max_top_k if memory.semantic else 0
        wider = {"semantic_recall": {"top_k": max(config.top_k, min(config.top_k + room, most))}}
        found = await memory.recall(
            thread_id, resource_id, vector_search_string=query, per_page=0, thread_config=wider
        )
        text = note(_outside(found, in_history, config.top_k, config.message_range))
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


def _outside(
    found: RecallResult, runs: set[str], top_k: int, window: MessageRange
) -> list[Message]:
    """The best `top_k` hits saved from runs other than `runs`, with their neighbours.
    Per thread, `found.messages` holds each hit's whole window in order, so a hit's
    neighbours are the entries beside it."""

    def outside(message_id: str) -> bool:
        return message_id.split(":")[0] not in runs

    hits = [h.message_id for h in found.hits if outside(h.message_id)][:top_k]
    threads: dict[str, list[Message]] = {}
    for m in found.messages:
        threads.setdefault(m.thread_id, []).append(m)
    kept: set[str] = set()
    for thread in threads.values():
        at = {m.id: n for n, m in enumerate(thread)}
        for hit in hits:
            if hit in at:
                start, end = max(0, at[hit] - window.before), at[hit] + window.after + 1
                kept.update(m.id for m in thread[start:end])
    return [m for m in found.messages if m.id in kept and outside(m.id)]


def _is_note(part: object) -> bool:
    return isinstance(part, SystemPromptPart) and part.content.startswith(NOTE)
