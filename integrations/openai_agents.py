"""OpenAI Agents SDK: `RecallstackSession`, a `Session` whose items are the messages of
a recallstack thread (saved, embedded, searchable from the user's other threads), with
semantic recall for each new turn (`session.recall_input`, the SDK's
`session_input_callback`); and `memory_search_tool`, a function tool that searches the
user's memory.

Needs the `openai-agents` extra. Works on an `AsyncMemory`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from recallstack.integrations import async_memory, missing

try:
    from agents import FunctionTool, SessionSettings, TResponseInputItem, function_tool
except ImportError as exc:
    raise missing("openai_agents", exc, "openai-agents") from exc

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message, Role, utc_now
from recallstack.integrations.recalled import NOTE, memory_search, note
from recallstack.integrations.threads import own_thread

ITEM = "openai_agents_item"
"""The metadata key under which a message keeps the SDK item it was saved from."""

_PAGE = 1000
"""Messages read per call when the whole session is asked for."""


class RecallstackSession:
    """The SDK's `Session` protocol over thread `session_id` of `resource_id`.

    Items round-trip as given. Messages of the thread saved otherwise (by `Memory`, or
    another integration) are read as `{"role", "content"}` items. The recall note
    `recall_input` adds is never saved.
    """

    def __init__(
        self,
        memory: AsyncMemory,
        session_id: str,
        *,
        resource_id: str,
        session_settings: SessionSettings | None = None,
    ) -> None:
        check_id(session_id, "session_id")
        check_id(resource_id, "resource_id")
        self.memory = async_memory(memory)
        self.session_id = session_id
        self.resource_id = resource_id
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest `limit` items (all when None), oldest first."""
        return [item for m in await self._newest(limit) if (item := _item(m)) is not None]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Saved as messages of the thread, after everything in it; the thread is made
        if need be. An item that is not JSON raises `InvalidInputError`, and then
        none of `items` is saved."""
        messages = [
            Message(
                thread_id=self.session_id,
                resource_id=self.resource_id,
                role=_role(item),
                content=_text(item),
                metadata={ITEM: item},
            )
            for item in items
            if not _is_note(item)
        ]
        if not messages:
            return
        await own_thread(self.memory, self.session_id, self.resource_id, create=True)
        newest = await self._newest(1)
        start = max([utc_now(), *(m.created_at + _TICK for m in newest)])
        await self.memory.save_messages(
            [m.model_copy(update={"created_at": start + n * _TICK}) for n, m in enumerate(messages)]
        )

    async def pop_item(self) -> TResponseInputItem | None:
        """Removes the newest item (its message and vectors) and returns it."""
        newest = await self._newest(1)
        if not newest:
            return None
        await self.memory.delete_messages([newest[0].id])
        return _item(newest[0])

    async def clear_session(self) -> None:
        """Deletes the thread with its messages and their vectors."""
        if await own_thread(self.memory, self.session_id, self.resource_id, create=False):
            await self.memory.delete_thread(self.session_id)

    async def recall_input(
        self, history: list[TResponseInputItem], new_input: list[TResponseInputItem]
    ) -> list[TResponseInputItem]:
        """For `RunConfig(session_input_callback=session.recall_input)`: the history,
        then a system note with what the memory recalls for the new user input (its
        semantic recall options: scope, `top_k`, neighbours), then the new input.
        Messages already in the history are not recalled again."""
        query = next((t for item in reversed(new_input) if (t := _user_text(item))), None)
        if query is None:
            return [*history, *new_input]
        found = await self.memory.recall(
            self.session_id,
            self.resource_id,
            vector_search_string=query,
            per_page=len(history),  # the history is the thread's newest items: not recalled
        )
        own = [m for m in found.messages if m.thread_id == self.session_id]
        page = {m.id for m in own[len(own) - min(len(history), len(own)) :]}
        text = note([m for m in found.messages if m.id not in page])
        if text is None:
            return [*history, *new_input]
        return [*history, cast(TResponseInputItem, {"role": "system", "content": text}), *new_input]

    async def _newest(self, limit: int | None) -> list[Message]:
        if limit is not None:
            if limit <= 0:
                return []
            page = await self.memory.recall(self.session_id, self.resource_id, per_page=limit)
            return page.messages
        pages: list[list[Message]] = []
        while True:
            page = await self.memory.recall(
                self.session_id, self.resource_id, per_page=_PAGE, page=len(pages)
            )
            pages.append(page.messages)
            if not page.has_more:
                return [m for p in reversed(pages) for m in p]


def memory_search_tool(memory: AsyncMemory, *, resource_id: str, top_k: int = 5) -> FunctionTool:
    """A tool the agent can call to search everything this user said before."""
    return function_tool(memory_search(memory, resource_id, top_k), name_override="search_memory")


_TICK = dt.timedelta(microseconds=1)


def _item(message: Message) -> TResponseInputItem | None:
    kept = (message.metadata or {}).get(ITEM)
    if kept is not None:
        return cast(TResponseInputItem, kept)
    if message.role == "tool" or not message.text:
        return None  # a tool call or result saved by another writer: no SDK shape to give it
    return cast(TResponseInputItem, {"role": message.role, "content": message.text})


def _role(item: TResponseInputItem) -> Role:
    data = cast(dict[str, Any], item)
    role = data.get("role")
    if role in ("user", "assistant", "system"):
        return cast(Role, role)
    if role == "developer":
        return "system"
    return "tool" if data.get("type") == "function_call_output" else "assistant"


def _text(item: TResponseInputItem) -> str:
    """What is embedded: a message's text; tool calls and their outputs have none."""
    data = cast(dict[str, Any], item)
    content = data.get("content") if "role" in data else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""


def _user_text(item: TResponseInputItem) -> str | None:
    return _text(item).strip() or None if cast(dict[str, Any], item).get("role") == "user" else None


def _is_note(item: TResponseInputItem) -> bool:
    data = cast(dict[str, Any], item)
    content = data.get("content")
    return data.get("role") == "system" and isinstance(content, str) and content.startswith(NOTE)
