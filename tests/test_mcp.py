"""The MCP server, through the SDK's own client: over stdio (`recallstack mcp`) and over
streamable HTTP (`/mcp` of `recallstack serve`, behind the API keys)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from served import ADA, BOB, bearer, serving

TOOLS = {"remember", "recall", "search", "list_threads", "read_thread", "forget"}
TRIP = ["I am vegetarian", "We fly to Osaka in May", "Kyoto temples at dawn"]


def stdio(db: Path, resource: str) -> StdioServerParameters:
    command = ["-m", "recallstack", "mcp", "--db", str(db), "--embedder", "hash/64"]
    return StdioServerParameters(command=sys.executable, args=[*command, "--resource", resource])


def over_http(url: str, key: str) -> Any:
    return streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(headers=bearer(key)))


def data(result: CallToolResult) -> Any:
    """A tool's structured answer (a list comes wrapped as {"result": [...]})."""
    assert not result.is_error, result.content
    content = result.structured_content
    assert content is not None
    return content.get("result", content)


def error_of(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(part, "text", "") for part in result.content)


def session(server: Any, body: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with Client(server) as client:
            await body(client)

    asyncio.run(main())


async def ada_remembers_and_recalls(client: Client) -> None:
    """Every tool once, as an assistant uses them."""
    assert {tool.name for tool in (await client.list_tools()).tools} >= TOOLS
    said = [{"role": "user", "content": text} for text in TRIP]
    saved = data(await client.call_tool("remember", {"thread_id": "trip", "messages": said}))
    assert saved["thread_id"] == "trip" and len(saved["message_ids"]) == 3 and saved["indexed"]
    more = [{"role": "assistant", "content": "Noted, no meat in the plan."}]
    data(await client.call_tool("remember", {"thread_id": "trip", "messages": more}))

    recalled = data(
        await client.call_tool(
            "recall", {"thread_id": "trip", "query": "vegetarian", "top_k": 1, "recent": 1}
        )
    )
    assert [line["text"] for line in recalled["recent"]] == ["Noted, no meat in the plan."]
    scored = [line for line in recalled["recalled"] if line["score"] is not None]
    assert [line["text"] for line in scored] == ["I am vegetarian"]

    found = data(await client.call_tool("search", {"query": "Osaka flight", "top_k": 1}))
    assert [line["text"] for line in found] == ["We fly to Osaka in May"]
    threads = data(await client.call_tool("list_threads", {}))
    assert [t["id"] for t in threads] == ["trip"]
    page = data(await client.call_tool("read_thread", {"thread_id": "trip", "per_page": 2}))
    assert [line["text"] for line in page] == ["Kyoto temples at dawn", more[0]["content"]]

    forgotten = data(await client.call_tool("forget", {"message_id": saved["message_ids"][0]}))
    assert forgotten == {"deleted": saved["message_ids"][0]}
    found = data(await client.call_tool("search", {"query": "vegetarian", "top_k": 10}))
    assert "I am vegetarian" not in [line["text"] for line in found]


async def refusals(client: Client) -> None:
    """Bad input is a tool error that says what was wrong, and nothing is written."""
    assert data(await client.call_tool("list_threads", {})) == []
    bad = await client.call_tool(
        "remember", {"thread_id": "x" * 5000, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert "thread_id is longer than" in error_of(bad)
    nul = await client.call_tool(
        "remember", {"thread_id": "t", "messages": [{"role": "user", "content": "a\x00b"}]}
    )
    assert "content" in error_of(nul)
    empty = await client.call_tool("remember", {"thread_id": "t", "messages": []})
    assert "1 to 1,000 messages" in error_of(empty)
    wrong_role = await client.call_tool(
        "remember", {"thread_id": "t", "messages": [{"role": "robot", "content": "hi"}]}
    )
    assert "role" in error_of(wrong_role)
    both = await client.call_tool("forget", {"thread_id": "t", "message_id": "m"})
    assert "not both" in error_of(both)
    missing = await client.call_tool("read_thread", {"thread_id": "nowhere"})
    assert "no thread 'nowhere'" in error_of(missing)
    assert data(await client.call_tool("list_threads", {})) == []


def test_stdio_every_tool(tmp_path: Path) -> None:
    session(stdio(tmp_path / "m.db", "ada"), ada_remembers_and_recalls)


def test_stdio_bad_input_is_a_tool_error_and_writes_nothing(tmp_path: Path) -> None:
    session(stdio(tmp_path / "m.db", "ada"), refusals)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path) as url:
        yield url


def test_http_every_tool_and_another_key_sees_nothing(served: str) -> None:
    session(over_http(served, ADA), ada_remembers_and_recalls)

    async def bob_looks(client: Client) -> None:
        assert data(await client.call_tool("list_threads", {})) == []
        assert data(await client.call_tool("search", {"query": "Osaka", "top_k": 10})) == []
        nothing = data(await client.call_tool("recall", {"thread_id": "trip", "query": "Osaka"}))
        assert nothing == {"recalled": [], "recent": []}
        for tool, arguments in (
            ("read_thread", {"thread_id": "trip"}),
            ("forget", {"thread_id": "trip"}),
        ):
            assert "no thread 'trip'" in error_of(await client.call_tool(tool, arguments))
        taken = await client.call_tool(
            "remember", {"thread_id": "trip", "messages": [{"role": "user", "content": "mine"}]}
        )
        assert "is taken" in error_of(taken)

    session(over_http(served, BOB), bob_looks)

    async def ada_still_has_it(client: Client) -> None:
        page = data(await client.call_tool("read_thread", {"thread_id": "trip"}))
        assert [line["text"] for line in page][-1] == "Noted, no meat in the plan."

    session(over_http(served, ADA), ada_still_has_it)


def test_http_bad_input_is_a_tool_error(served: str) -> None:
    session(over_http(served, ADA), refusals)


@pytest.mark.parametrize("headers", [{}, bearer("not-a-key-0123456789"), {"Authorization": ADA}])
def test_http_without_a_valid_key_is_a_401(served: str, headers: dict[str, str]) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = httpx.post(
        f"{served}/mcp",
        content=json.dumps(initialize),
        headers={**headers, "Content-Type": "application/json", "Accept": "application/json"},
    )
    assert answer.status_code == 401
    assert answer.json()["error"] == "unauthorized"
