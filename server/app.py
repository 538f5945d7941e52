"""The HTTP API: versioned JSON endpoints over one `AsyncMemory`, the resource of each request
taken from its API key. Another resource's thread or message is answered as a missing one.

Request and response bodies are the Python API's own models (`Thread`, `Message`,
`SaveResult`, `RecallResult`, `SearchHit`), so the OpenAPI document at `/openapi.json`
describes what `Memory` returns. Every `RecallstackError` is a JSON body
`{"error": kind, "message": ...}` with a 4xx status (a backend's failure: 503).

FastAPI reads the endpoints' annotations at runtime, so this module does not postpone
them (no `from __future__ import annotations`).
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, StrictInt
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from recallstack import __version__
from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.api.doctor import State
from recallstack.core.api.operations import RecallResult, SaveResult, SearchHit
from recallstack.core.errors import (
    BackendError,
    EmbeddingRefusedError,
    InvalidInputError,
    NotFoundError,
    RecallstackError,
    UnsupportedFeatureError,
    UnsupportedFilterError,
)
from recallstack.core.inputs import Document, Id, Text, check_id
from recallstack.core.messages import Message, Part, Role
from recallstack.core.records import Page, Thread
from recallstack.server.inspector import add_inspector
from recallstack.server.keys import Keys
from recallstack.server.limits import MAX_BATCH, MAX_BODY, MAX_PAGE
from recallstack.server.mcp_server import McpEndpoint, Running
from recallstack.server.ownership import own_message, own_thread

log = logging.getLogger("recallstack.server")


class Refused(Exception):
    """An answer other than 2xx that no `RecallstackError` stands for: a conflict, a missing
    key, a body too large."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


# ---- request bodies -------------------------------------------------------------------


class Body(BaseModel):
    """A request body: unknown fields refused, and numbers only where numbers go (JSON's
    `true` is not 1)."""

    model_config = ConfigDict(extra="forbid")


class NewThread(Body):
    """A thread to create for the caller's resource."""

    thread_id: Id | None = Field(default=None, description="Its id; a new UUID if left out.")
    title: Text | None = None
    metadata: Document | None = None


def iso_8601(value: Any) -> datetime:
    """A time as the API takes it: ISO 8601 text (a number is not read as a timestamp)."""
    if not isinstance(value, str):
        raise ValueError("a date and time as ISO 8601 text")
    return datetime.fromisoformat(value)


Time = Annotated[datetime, BeforeValidator(iso_8601)]


class NewMessage(Body):
    """A message to save in the thread the URL names."""

    id: Id | None = Field(default=None, description="Its id; a new UUID if left out.")
    role: Role
    content: Text | list[Part]
    created_at: Time | None = None
    metadata: Document | None = None


class NewMessages(Body):
    messages: list[NewMessage] = Field(min_length=1, max_length=MAX_BATCH)


class RecallRequest(Body):
    """`Memory.recall`: the thread's newest page, and what the query recalls."""

    thread_id: Id
    query: str | None = Field(default=None, description="What to recall; none: the page only.")
    per_page: StrictInt | None = Field(default=None, ge=0, le=MAX_PAGE)
    page: StrictInt = Field(default=0, ge=0)
    options: dict[str, Any] | None = Field(
        default=None, description="This call's memory options, as `thread_config` in Python."
    )


class SearchRequest(Body):
    """`Memory.search`: the caller's memory, without a thread."""

    query: str
    top_k: StrictInt | None = Field(default=None, ge=1, le=MAX_PAGE)
    filter: dict[str, Any] | None = None
    threshold: Annotated[float, Strict()] | None = None
    thread_id: Id | None = None


class IndexStates(BaseModel):
    """Where each message of a page stands in each index (`Memory.index_states`)."""

    indexes: list[str]
    messages: dict[str, dict[str, State]] = Field(
        description="Message id → index → `indexed`, `not indexed`, `stale` or `not embedded`."
    )


class Health(BaseModel):
    status: str
    version: str


class ErrorBody(BaseModel):
    """Every answer that is not a success."""

    error: str
    message: str


# ---- the app --------------------------------------------------------------------------


def create_app(
    memory: AsyncMemory,
    *,
    keys: Keys | None = None,
    resource: str | None = None,
    max_body: int = MAX_BODY,
    owns_memory: bool = False,
    host: str = "127.0.0.1",
) -> FastAPI:
    """The API over `memory`, and its MCP server at `/mcp`: with `keys`, each request acts
    for its key's resource; without, every request acts for `resource` (local use only).
    `owns_memory`: close it on shutdown. `host`: where it listens (on a loopback address,
    `/mcp` refuses other Host headers, against DNS rebinding)."""
    if (keys is None) == (resource is None):
        raise InvalidInputError("the server needs API keys, or (without them) one resource")
    if resource is not None:
        check_id(resource, "resource")

    mcp = Running(memory, host)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.running():
            yield
        if owns_memory:
            await memory.aclose()

    errors: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorBody} for status in (400, 401, 404, 409, 413, 422, 503)
    }
    app = FastAPI(
        title="recallstack",
        version=__version__,
        summary="Long-term conversational memory for AI agents.",
        lifespan=lifespan,
        responses=errors,
        dependencies=[Depends(known_parameters)],
    )
    app.add_middleware(McpEndpoint, mcp=mcp, keys=keys, resource=resource)
    app.add_middleware(BodyLimit, max_body=max_body)
    bearer = HTTPBearer(auto_error=False, description="An API key, bound to one resource.")

    async def caller(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> str:
        """The resource this request acts for."""
        if keys is None:
            assert resource is not None
            return resource
        found = keys.resource_of(credentials.credentials) if credentials else None
        if found is None:
            raise Refused(401, "unauthorized", "a valid API key is needed (Authorization: Bearer)")
        return found

    Caller = Annotated[str, Depends(caller)]

    @app.get("/v1/health", tags=["health"])
    async def health() -> Health:
        """Whether the server answers; no key needed."""
        return Health(status="ok", version=__version__)

    @app.post("/v1/threads", status_code=201, tags=["threads"])
    async def create_thread(body: NewThread, resource_id: Caller) -> Thread:
        """Create a thread for the caller's resource; 409 if the id is taken."""
        if body.thread_id is not None and await memory.get_thread(body.thread_id) is not None:
            raise Refused(409, "conflict", f"the thread id {body.thread_id!r} is taken")
        return await memory.create_thread(
            resource_id, thread_id=body.thread_id, title=body.title, metadata=body.metadata
        )

    @app.get("/v1/threads", tags=["threads"])
    async def list_threads(
        resource_id: Caller,
        page: Annotated[int, Query(ge=0)] = 0,
        per_page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    ) -> Page[Thread]:
        """The caller's threads, newest first."""
        return await memory.list_threads(resource_id, page=page, per_page=per_page)

    @app.get("/v1/threads/{thread_id}", tags=["threads"])
    async def get_thread(thread_id: str, resource_id: Caller) -> Thread:
        return await own_thread(memory, resource_id, thread_id)

    @app.delete("/v1/threads/{thread_id}", status_code=204, tags=["threads"])
    async def delete_thread(thread_id: str, resource_id: Caller) -> Response:
        """Delete a thread, its messages and their vectors."""
        await own_thread(memory, resource_id, thread_id)
        await memory.delete_thread(thread_id)
        return Response(status_code=204)

    @app.post("/v1/threads/{thread_id}/messages", tags=["messages"])
    async def save_messages(thread_id: str, body: NewMessages, resource_id: Caller) -> SaveResult:
        """Save a batch of messages in the thread, and index them for recall."""
        await own_thread(memory, resource_id, thread_id)
        messages = [
            Message(
                thread_id=thread_id,
                resource_id=resource_id,
                **body_message.model_dump(exclude_none=True),
            )
            for body_message in body.messages
        ]
        stored = await memory.get_messages([m.id for m in messages])
        taken = [m.id for m in stored if m.resource_id != resource_id]
        if taken:
            raise Refused(409, "conflict", f"the message id {taken[0]!r} is taken")
        return await memory.save_messages(messages)

    @app.get("/v1/threads/{thread_id}/messages", tags=["messages"])
    async def list_messages(
        thread_id: str,
        resource_id: Caller,
        page: Annotated[int, Query(ge=0)] = 0,
        per_page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    ) -> Page[Message]:
        """A page of the thread's messages, page 0 the newest, each page chronological."""
        await own_thread(memory, resource_id, thread_id)
        found = await memory.recall(thread_id, resource_id, per_page=per_page, page=page)
        return Page(
            items=found.messages,
            total=found.total,
            page=page,
            per_page=per_page,
            has_more=found.has_more,
        )

    @app.get("/v1/threads/{thread_id}/index-states", tags=["messages"])
    async def index_states(
        thread_id: str,
        resource_id: Caller,
        page: Annotated[int, Query(ge=0)] = 0,
        per_page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    ) -> IndexStates:
        """Whether each message of a page (as `GET .../messages` pages them) has current
        vectors in each index, as `recallstack doctor` judges them."""
        await own_thread(memory, resource_id, thread_id)
        found = await memory.recall(thread_id, resource_id, per_page=per_page, page=page)
        states = await memory.index_states(found.messages)
        by_message = {m.id: {name: states[name][m.id] for name in states} for m in found.messages}
        return IndexStates(indexes=list(states), messages=by_message)

    @app.delete("/v1/messages/{message_id}", status_code=204, tags=["messages"])
    async def delete_message(message_id: str, resource_id: Caller) -> Response:
        """Delete a message and its vectors."""
        await own_message(memory, resource_id, message_id)
        await memory.delete_messages([message_id])
        return Response(status_code=204)

    @app.post("/v1/recall", tags=["recall"])
    async def recall(body: RecallRequest, resource_id: Caller) -> RecallResult:
        """The thread's newest messages, the messages the query recalls with their
        neighbours, and `context`: what to hand the model."""
        await own_thread(memory, resource_id, body.thread_id)
        return await memory.recall(
            body.thread_id,
            resource_id,
            body.query,
            per_page=body.per_page,
            page=body.page,
            thread_config=body.options,
        )

    @app.post("/v1/search", tags=["recall"])
    async def search(body: SearchRequest, resource_id: Caller) -> list[SearchHit]:
        """The caller's messages most similar to the query, best first."""
        return await memory.search(
            resource_id,
            body.query,
            top_k=body.top_k,
            filter=body.filter,
            threshold=body.threshold,
            thread_id=body.thread_id,
        )

    add_inspector(app)
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    return app


# ---- errors ---------------------------------------------------------------------------


def answer(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse({"error": kind, "message": message}, status, headers=headers)


def status_of(exc: RecallstackError) -> tuple[int, str]:
    """The status and kind of an error of the library."""
    if isinstance(exc, NotFoundError):
        return 404, "not_found"
    if isinstance(exc, EmbeddingRefusedError):
        return 422, "embedding_refused"
    if isinstance(exc, BackendError):
        return 503, "backend_error"
    if isinstance(exc, UnsupportedFilterError | UnsupportedFeatureError):
        return 422, "unsupported"
    if isinstance(exc, InvalidInputError):
        return 422, "invalid_input"
    return 400, "refused"


async def library_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RecallstackError)
    status, kind = status_of(exc)
    message = " ".join(str(exc).split()) or type(exc).__name__
    if status == 503:  # the driver's words stay in the server's log
        log.error("%s %s: %s", request.method, request.url.path, message)
        message = "a backend failed; the server's log says why"
    return answer(status, kind, message)


async def refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refused)
    return answer(exc.status, exc.kind, str(exc))


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    return answer(422, "invalid_input", f"{where}: {first.get('msg', 'invalid')}")


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    kinds = {404: "not_found", 405: "method_not_allowed"}
    kind = kinds.get(exc.status_code, "refused")
    headers = exc.headers
    if exc.status_code == 405:  # every method of the path (Starlette names one route's)
        allowed = {
            method
            for route in request.app.routes
            if isinstance(route, APIRoute) and route.matches(request.scope)[0] != Match.NONE
            for method in route.methods or ()
        }
        headers = {"Allow": ", ".join(sorted(allowed))}
    return answer(exc.status_code, kind, str(exc.detail), headers)


async def known_parameters(request: Request) -> None:
    """Refuses query parameters the endpoint does not take (a typo, `per-page`, is an
    error rather than a default silently used)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = {p.alias for p in route.dependant.query_params}  # the endpoint's own
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise Refused(422, "invalid_input", f"query: unknown parameter {unknown[0]!r}")


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return answer(500, "internal", "an unexpected error; the server's log has it")


HANDLERS: Mapping[type[Exception], Callable[[Request, Exception], Awaitable[JSONResponse]]] = {
    RecallstackError: library_error,
    Refused: refused,
    RequestValidationError: invalid_request,
    HTTPException: http_error,
    Exception: unexpected,
}


class BodyLimit:
    """Refuses a request body over `max_body` bytes with 413, before it is parsed: by its
    Content-Length when it has one, else as it streams in."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = answer(413, "too_large", f"the body is over {self.max_body:,} bytes")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await too_large(scope, receive, send)
            return
        seen, refused = 0, False

        async def counted() -> AsgiMessage:
            nonlocal seen, refused
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body and not refused:  # answer now; the app sees the client go
                refused = True
                await too_large(scope, receive, send)
                return {"type": "http.disconnect"}
            return message

        async def unless_refused(message: AsgiMessage) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counted, unless_refused)
