"""The resource boundary both servers keep: a caller reaches its own resource's threads and
messages; another resource's are answered as missing ones, so a caller cannot learn that
they exist."""

from __future__ import annotations

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.errors import NotFoundError
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message
from recallstack.core.records import Thread


async def own_thread(memory: AsyncMemory, resource_id: str, thread_id: str) -> Thread:
    """The caller's thread; `NotFoundError` when it is missing or another resource's."""
    check_id(thread_id, "thread_id")
    thread = await memory.get_thread(thread_id)
    if thread is None or thread.resource_id != resource_id:
        raise NotFoundError(f"no thread {thread_id!r}")
    return thread


async def own_message(memory: AsyncMemory, resource_id: str, message_id: str) -> Message:
    """The caller's message; `NotFoundError` when it is missing or another resource's."""
    check_id(message_id, "message_id")
    found = await memory.get_messages([message_id])
    if not found or found[0].resource_id != resource_id:
        raise NotFoundError(f"no message {message_id!r}")
    return found[0]
