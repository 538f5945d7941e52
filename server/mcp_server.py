"""The memory as Model Context Protocol tools, for assistants that speak MCP (desktop
assistants, IDE agents): remember, recall, search, list_threads, read_thread, forget.

One resource per caller, as in the HTTP API: over stdio the one `recallstack mcp` was
started for; over streamable HTTP (mounted at `/mcp` by `recallstack serve`) the one its
API key is bound to. `CALLER` carries it to the tools; another resource's thread or message
is answered as a missing one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from datetime import datetime
from functools import wraps
from typing import Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from recallstack import __version__
from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.errors import BackendError, NotFoundError, RecallstackError
from recallstack.core.inputs import check_id
from recallstack.core.messages import Message
from recallstack.server.keys import Keys
from recallstack.server.limits import MAX_BATCH, MAX_PAGE
from recallstack.server.ownership import own_message, own_thread

CALLER: ContextVar[str] = ContextVar("recallstack_caller")
"""The resource the current tool call acts for."""

INSTRUCTIONS = """\
Long-term memory of past conversations with this user. Use `recall` at the start of a turn
when earlier conversations may matter (preferences, facts the user gave, decisions made),
`remember` to save what was said in this conversation, `search` to look across all of the
user's conversations without a thread, `list_threads` and `read_thread` to browse, and
`forget` when the user asks you to delete something. Thread ids are yours to choose: use one
per conversation and keep using it."""

P = ParamSpec("P")
R = TypeVar("R")


class Said(BaseModel):
    """A message to remember."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system"]
    content: str = Field(description="What was said, as plain text.")


class Line(BaseModel):
    """A stored message, as a model reads it."""

    id: str
    thread_id: str
    role: str
    text: str
    created_at: datetime
    score: float | None = Field(
        default=None, description="How well it matches the query (recalled messages only)."
    )


class Remembered(BaseModel):
    thread_id: str
    message_ids: list[str]
    indexed: bool = Field(description="False: saved, but not yet searchable (retried later).")


class Recalled(BaseModel):
    recalled: list[Line] = Field(
        description="Past messages relevant to the query, with their neighbours, chronological "
        "within each thread; `score` marks the ones the query matched."
    )
    recent: list[Line] = Field(description="The thread's newest messages.")


class ThreadInfo(BaseModel):
    id: str
    title: str | None
    created_at: datetime
    updated_at: datetime


class Forgotten(BaseModel):
    deleted: str


def as_line(message: Message, score: float | None = None) -> Line:
    return Line(
        id=message.id,
        thread_id=message.thread_id,
        role=message.role,
        text=message.text,
        created_at=message.created_at,
        score=score,
    )


def reported(tool: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """The library's errors as tool errors a model can read and correct; a backend's
    failure without the driver's words (they stay in the server's log)."""

    @wraps(tool)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await tool(*args, **kwargs)
        except BackendError as exc:
            raise ToolError("a backend failed; the server's log says why") from exc
        except RecallstackError as exc:
            raise ToolError(" ".join(str(exc).split())) from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ToolError(f"{where}: {first['msg']}") from exc

    return call


def create_mcp(memory: AsyncMemory) -> MCPServer:
    """The MCP server over `memory`; each call acts for the resource in `CALLER`."""
    server: MCPServer = MCPServer(
        "recallstack", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    @server.tool(annotations=ToolAnnotations(destructive_hint=False))
    @reported
    async def remember(
        thread_id: str, messages: list[Said], title: str | None = None
    ) -> Remembered:
        """Save messages of a conversation so they can be recalled later. `thread_id` names
        the conversation (created on first use); `messages` in the order they were said."""
        if not 1 <= len(messages) <= MAX_BATCH:
            raise ToolError(f"messages: give 1 to {MAX_BATCH:,} messages")
        check_id(thread_id, "thread_id")
        said_now = [
            Message(thread_id=thread_id, resource_id=CALLER.get(), role=m.role, content=m.content)
            for m in messages
        ]  # checked before anything is written
        thread = await memory.get_thread(thread_id)
        if thread is None:
            await memory.create_thread(CALLER.get(), thread_id=thread_id, title=title)
        elif thread.resource_id != CALLER.get():
            raise ToolError(f"the thread id {thread_id!r} is taken; choose another")
        saved = await memory.save_messages(said_now)
        return Remembered(
            thread_id=thread_id,
            message_ids=[m.id for m in saved.messages],
            indexed=not saved.not_indexed,
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @reported
    async def recall(
        thread_id: str,
        query: str,
        top_k: int = Field(default=5, ge=1, le=100, description="Messages to recall."),
        scope: Literal["thread", "resource"] = Field(
            default="resource",
            description="'resource': all of this user's conversations; 'thread': this one.",
        ),
        recent: int = Field(default=10, ge=0, le=100, description="Newest messages to add."),
    ) -> Recalled:
        """Recall the past messages most relevant to `query`, each with the messages around
        it, and the thread's newest messages. Use it before answering when earlier
        conversations may hold what the user refers to."""
        try:
            await own_thread(memory, CALLER.get(), thread_id)
        except NotFoundError:  # nothing to recall: a missing thread, or another resource's
            return Recalled(recalled=[], recent=[])
        options: dict[str, Any] = {"semantic_recall": {"top_k": top_k, "scope": scope}}
        found = await memory.recall(
            thread_id, CALLER.get(), query, per_page=0, thread_config=options
        )
        newest = await memory.recall(thread_id, CALLER.get(), per_page=recent)
        shown = {m.id for m in newest.messages}
        scores = {hit.message_id: hit.score for hit in found.hits}
        return Recalled(
            recalled=[as_line(m, scores.get(m.id)) for m in found.messages if m.id not in shown],
            recent=[as_line(m) for m in newest.messages],
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @reported
    async def search(
        query: str,
        top_k: int = Field(default=10, ge=1, le=100),
        thread_id: str | None = Field(default=None, description="Only this conversation."),
    ) -> list[Line]:
        """Search all of this user's remembered messages for `query`, best match first,
        without a current conversation."""
        hits = await memory.search(CALLER.get(), query, top_k=top_k, thread_id=thread_id)
        return [as_line(hit.message, hit.score) for hit in hits]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @reported
    async def list_threads(
        page: int = Field(default=0, ge=0), per_page: int = Field(default=50, ge=1, le=MAX_PAGE)
    ) -> list[ThreadInfo]:
        """This user's conversations, newest first."""
        found = await memory.list_threads(CALLER.get(), page=page, per_page=per_page)
        return [
            ThreadInfo(id=t.id, title=t.title, created_at=t.created_at, updated_at=t.updated_at)
            for t in found.items
        ]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @reported
    async def read_thread(
        thread_id: str,
        page: int = Field(default=0, ge=0, description="0: the newest messages."),
        per_page: int = Field(default=50, ge=1, le=MAX_PAGE),
    ) -> list[Line]:
        """A page of a conversation's messages, chronological; page 0 is the newest."""
        await own_thread(memory, CALLER.get(), thread_id)
        found = await memory.recall(thread_id, CALLER.get(), per_page=per_page, page=page)
        return [as_line(m) for m in found.messages]

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    @reported
    async def forget(
        thread_id: str | None = Field(default=None, description="Delete this conversation."),
        message_id: str | None = Field(default=None, description="Delete this message."),
    ) -> Forgotten:
        """Delete a conversation or one message, for good. Give exactly one of the two."""
        if (thread_id is None) == (message_id is None):
            raise ToolError("give thread_id or message_id, not both and not neither")
        if thread_id is not None:
            await own_thread(memory, CALLER.get(), thread_id)
            await memory.delete_thread(thread_id)
            return Forgotten(deleted=thread_id)
        assert message_id is not None
        await own_message(memory, CALLER.get(), message_id)
        await memory.delete_messages([message_id])
        return Forgotten(deleted=message_id)

    return server


class Running:
    """The MCP server's streamable HTTP app over `memory`, made anew each time the web app
    starts: the SDK's session manager runs once per instance. Stateless, JSON answers."""

    def __init__(self, memory: AsyncMemory, host: str) -> None:
        self.memory, self.host = memory, host
        self.app: ASGIApp | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        server = create_mcp(self.memory)
        app = server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True, host=self.host
        )
        async with server.session_manager.run():
            self.app = app
            try:
                yield
            finally:
                self.app = None


class McpEndpoint:
    """`/mcp` for the MCP server behind the API keys, every other path for `app`: 401
    without a valid key, else `CALLER` is the key's resource (or, on a server without keys,
    its one resource) while the request is served."""

    def __init__(self, app: ASGIApp, mcp: Running, keys: Keys | None, resource: str | None):
        self.app, self.mcp, self.keys, self.resource = app, mcp, keys, resource

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != "/mcp":
            await self.app(scope, receive, send)
            return
        found = self.resource
        if self.keys is not None:
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            scheme, _, key = header.partition(" ")
            found = self.keys.resource_of(key.strip()) if scheme.lower() == "bearer" else None
        if found is None:
            refusal = JSONResponse(
                {"error": "unauthorized", "message": "a valid API key is needed"},
                401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refusal(scope, receive, send)
            return
        if self.mcp.app is None:  # the app's lifespan has not started it
            down = {"error": "unavailable", "message": "the MCP server is not running"}
            await JSONResponse(down, 503)(scope, receive, send)
            return
        token = CALLER.set(found)
        try:
            await self.mcp.app({**scope, "path": "/mcp"}, receive, send)
        finally:
            CALLER.reset(token)
