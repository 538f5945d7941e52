"""MessageHistory: the last N messages of the thread in, new messages persisted out."""

from __future__ import annotations

from recallstack.core.contracts.processor import RequestContext
from recallstack.core.contracts.storage import Storage
from recallstack.core.errors import NotFoundError
from recallstack.core.messages import Message
from recallstack.core.records import MessagePage, Thread
from recallstack.core.runtime.config import MemoryConfig


class MessageHistory:
    """Input and output processor `message-history`.

    `Memory` passes its whole `MemoryConfig` as `config`, so that both
    processors read one configuration object.
    """

    id = "message-history"
    name = "MessageHistory"

    def __init__(
        self,
        *,
        storage: Storage,
        last_messages: int | bool = 10,
        config: MemoryConfig | None = None,
    ) -> None:
        self.storage = storage
        self.config = config or MemoryConfig(last_messages=last_messages)

    def recent(
        self, thread_id: str, resource_id: str | None, per_page: int, page: int = 0
    ) -> MessagePage:
        """A page of the thread's newest messages (page 0 the newest), chronological,
        tagged `source="memory"`."""
        newest = self.storage.list_messages(
            thread_id,
            resource_id=resource_id,
            page=page,
            per_page=per_page,
            order="desc",
        )
        items = [m.model_copy(update={"source": "memory"}) for m in reversed(newest.items)]
        return newest.model_copy(update={"items": items})

    def process_input(self, messages: list[Message], context: RequestContext) -> list[Message]:
        """Put the thread's recent messages (not already in the input) before the
        conversation, after its system messages. Storage errors raise."""
        last = self.config.merged(context.config).last_messages
        if last is False or last == 0:
            return messages
        present = {m.id for m in messages}
        recent = self.recent(context.thread_id, context.resource_id, last)
        history = [m for m in recent.items if m.id not in present]
        system = [m for m in messages if m.role == "system"]
        return [*system, *history, *(m for m in messages if m.role != "system")]

    def process_output_result(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """Persist the new messages (not those memory added), creating the thread if needed."""
        new = [m for m in messages if m.source is None]
        if not new:
            return messages
        if self.storage.get_thread(context.thread_id) is None:
            if context.resource_id is None:
                raise NotFoundError(
                    f"thread {context.thread_id!r} does not exist and the context has no "
                    "resource_id to create it with"
                )
            thread = Thread(id=context.thread_id, resource_id=context.resource_id)
            self.storage.save_thread(thread)
        self.storage.save_messages(new)
        return messages
