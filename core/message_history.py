"""MessageHistory: the last N messages of the thread in, new messages persisted out."""

from __future__ import annotations

from recallstack.core.config import MemoryConfig
from recallstack.core.errors import NotFoundError
from recallstack.core.messages import Message
from recallstack.core.processor import RequestContext
from recallstack.core.records import Thread
from recallstack.core.storage import Storage


class MessageHistory:
    """Input and output processor `message-history`."""

    id = "message-history"
    name = "MessageHistory"

    def __init__(self, *, storage: Storage, last_messages: int | bool = 10) -> None:
        self.storage = storage
        self.config = MemoryConfig(last_messages=last_messages)

    def process_input(self, messages: list[Message], context: RequestContext) -> list[Message]:
        """Put the thread's recent messages (not already in the input) before the conversation."""
        last = self.config.merged(context.config).last_messages
        if last is False or last == 0:
            return messages
        page = self.storage.list_messages(
            context.thread_id, resource_id=context.resource_id, per_page=last, order="desc"
        )
        present = {m.id for m in messages}
        history = [
            m.model_copy(update={"source": "memory"})
            for m in reversed(page.items)
            if m.id not in present
        ]
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
            self.storage.save_thread(Thread(id=context.thread_id, resource_id=context.resource_id))
        self.storage.save_messages(new)
        return messages
