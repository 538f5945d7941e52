"""The thread an integration writes to: made when it is missing, refused when it is
another resource's (the resource is the security boundary)."""

from __future__ import annotations

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.errors import InvalidInputError


async def own_thread(
    memory: AsyncMemory, thread_id: str, resource_id: str, *, create: bool
) -> bool:
    """Whether `thread_id` exists as `resource_id`'s (made first when `create`)."""
    thread = await memory.get_thread(thread_id)
    if thread is None:
        if create:
            await memory.create_thread(resource_id, thread_id=thread_id)
        return create
    if thread.resource_id != resource_id:
        raise InvalidInputError(
            f"thread {thread_id!r} belongs to another resource than {resource_id!r}"
        )
    return True
