"""How the integrations show a model what the memory recalled: one note, a line per
message, oldest first, each dated and attributed; and the search behind their
memory-search tools, whose answers are such lines."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message
from recallstack.integrations import async_memory

NOTE = "Recalled from this user's earlier conversations:"
"""How a note begins; integrations use it to tell their own notes from the conversation."""


def note(messages: Sequence[Message]) -> str | None:
    """The note for what was recalled, or None when nothing with text was."""
    lines = [line(m) for m in messages if m.text.strip()]
    return "\n".join([NOTE, *lines]) if lines else None


def line(message: Message) -> str:
    return f"[{message.created_at:%Y-%m-%d}] {message.role}: {message.text}"


def memory_search(
    memory: AsyncMemory, resource_id: str, top_k: int
) -> Callable[[str], Awaitable[list[str]]]:
    """The function a memory-search tool calls; frameworks read its name, signature and
    docstring for the tool's schema."""
    async_memory(memory)
    check_id(resource_id, "resource_id")

    async def search_memory(query: str) -> list[str]:
        """Search this user's earlier conversations; returns the best matches, dated."""
        hits = await memory.search(resource_id, query, top_k=top_k)
        return [line(h.message) for h in hits]

    return search_memory
