"""`recallstack serve`: the HTTP API over real HTTP, each key bound to its resource, errors as
JSON, limits before parsing, concurrent clients, and the OpenAPI document checked by
schemathesis."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance
from served import ADA, BOB, KEYS, bearer, serving

from recallstack import AsyncMemory
from recallstack.core.errors import InvalidInputError
from recallstack.server.app import create_app
from recallstack.server.keys import Keys
from recallstack.server.limits import MAX_BATCH


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path) as url:
        yield url


def test_two_keys_over_real_http_see_only_their_own_memory(served: str) -> None:
    """Ada creates a thread, saves, recalls and searches; Bob's key gets 404 for each of
    her threads and messages, empty lists elsewhere, and cannot delete anything of hers."""
    ada = httpx.Client(base_url=served, headers=bearer(ADA))
    bob = httpx.Client(base_url=served, headers=bearer(BOB))
    made = ada.post("/v1/threads", json={"thread_id": "trip", "title": "Japan"})
    assert made.status_code == 201 and made.json()["resource_id"] == "ada"
    texts = ["I am vegetarian", "We fly to Osaka in May", "Kyoto temples at dawn"]
    saved = ada.post(
        "/v1/threads/trip/messages",
        json={"messages": [{"role": "user", "content": text} for text in texts]},
    ).json()
    assert len(saved["indexed"]) == 3 and saved["not_indexed"] == []
    recalled = ada.post(
        "/v1/recall", json={"thread_id": "trip", "query": "vegetarian", "per_page": 0}
    ).json()
    assert recalled["hits"] and recalled["messages"][0]["content"] == "I am vegetarian"
    found = ada.post("/v1/search", json={"query": "Osaka flight", "top_k": 1}).json()
    assert [hit["message"]["content"] for hit in found] == ["We fly to Osaka in May"]
    page = ada.get("/v1/threads/trip/messages", params={"per_page": 2}).json()
    assert page["total"] == 3 and len(page["items"]) == 2 and page["has_more"]
    assert [t["id"] for t in ada.get("/v1/threads").json()["items"]] == ["trip"]

    message_id = saved["messages"][0]["id"]
    for method, path, body in (
        ("GET", "/v1/threads/trip", None),
        ("GET", "/v1/threads/trip/messages", None),
        ("POST", "/v1/threads/trip/messages", {"messages": [{"role": "user", "content": "x"}]}),
        ("POST", "/v1/recall", {"thread_id": "trip", "query": "vegetarian"}),
        ("POST", "/v1/search", {"query": "x", "thread_id": "trip"}),
        ("DELETE", f"/v1/messages/{message_id}", None),
        ("DELETE", "/v1/threads/trip", None),
    ):
        answer = bob.request(method, path, json=body)
        assert answer.status_code == 404, (method, path)
        missing = bob.request(method, path.replace("trip", "nothing-here"), json=body)
        assert answer.json()["error"] == missing.json()["error"] == "not_found"
    assert bob.get("/v1/threads").json()["items"] == []
    assert bob.post("/v1/search", json={"query": "vegetarian"}).json() == []
    assert ada.get("/v1/threads/trip/messages").json()["total"] == 3  # nothing of hers went

    assert ada.delete(f"/v1/messages/{message_id}").status_code == 204
    assert ada.get("/v1/threads/trip/messages").json()["total"] == 2
    assert ada.delete("/v1/threads/trip").status_code == 204
    assert ada.get("/v1/threads/trip").status_code == 404

    for headers in ({}, bearer("an-unknown-key-0123456789"), {"Authorization": "Basic x"}):
        refused = httpx.get(f"{served}/v1/threads", headers=headers)
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"


# ---- in process: errors, limits, concurrency ------------------------------------------


@pytest.fixture
def client() -> Iterator[TestClient]:
    memory = AsyncMemory("memory://", "memory://", "hash/64", {"semantic_recall": True})
    with TestClient(create_app(memory, keys=Keys(KEYS), owns_memory=True)) as client:
        client.headers.update(bearer(ADA))
        yield client


def test_errors_are_json_with_a_4xx_and_nothing_is_written(client: TestClient) -> None:
    assert client.post("/v1/threads", json={"thread_id": "t"}).status_code == 201

    def refused(status: int, kind: str, method: str, path: str, **request: Any) -> str:
        answer = client.request(method, path, **request)
        assert (answer.status_code, answer.json()["error"]) == (status, kind), answer.text
        message: str = answer.json()["message"]
        return message

    assert "role" in refused(
        422, "invalid_input", "POST", "/v1/threads/t/messages", json={"messages": [{"x": 1}]}
    )
    refused(422, "invalid_input", "POST", "/v1/threads/t/messages", json={"messages": []})
    many = {"messages": [{"role": "user", "content": "x"}] * (MAX_BATCH + 1)}
    refused(422, "invalid_input", "POST", "/v1/threads/t/messages", json=many)
    nul = {"messages": [{"role": "user", "content": "a\x00b"}]}
    refused(422, "invalid_input", "POST", "/v1/threads/t/messages", json=nul)
    for when in (12345, "12345", "May 1st"):  # ISO 8601 text only, never a timestamp
        at = {"messages": [{"role": "user", "content": "x", "created_at": when}]}
        assert "created_at" in refused(
            422, "invalid_input", "POST", "/v1/threads/t/messages", json=at
        )
    refused(422, "invalid_input", "POST", "/v1/recall", json={"thread_id": "t", "query": 5})
    for number in ({"per_page": True}, {"page": False}):  # JSON's true is not 1
        refused(422, "invalid_input", "POST", "/v1/recall", json={"thread_id": "t", **number})
    for number in ({"threshold": True}, {"top_k": True}):
        refused(422, "invalid_input", "POST", "/v1/search", json={"query": "x", **number})
    refused(422, "invalid_input", "GET", "/v1/threads", params={"per-page": 5})
    refused(422, "invalid_input", "GET", "/v1/threads/" + "x" * 600)
    refused(422, "invalid_input", "POST", "/v1/search", json={"query": "x", "filter": {"$x": 1}})
    refused(422, "invalid_input", "POST", "/v1/recall", content=b"{not json", headers=JSON)
    refused(409, "conflict", "POST", "/v1/threads", json={"thread_id": "t"})
    refused(404, "not_found", "GET", "/v1/nowhere")
    allowed = client.request("PUT", "/v1/threads")
    assert allowed.status_code == 405 and allowed.headers["allow"] == "GET, POST"
    assert client.get("/v1/threads/t/messages").json()["total"] == 0  # nothing was written


JSON = {"Content-Type": "application/json"}


def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    """413 by Content-Length, and for a chunked body as it streams in."""
    memory = AsyncMemory("memory://", "memory://", "hash/64", {"semantic_recall": True})
    app = create_app(memory, keys=Keys(KEYS), max_body=1_000, owns_memory=True)
    with TestClient(app) as client:
        client.headers.update(bearer(ADA))
        big = {"thread_id": "t", "title": "x" * 2_000}
        answer = client.post("/v1/threads", json=big)
        assert answer.status_code == 413 and answer.json()["error"] == "too_large"

        def chunks() -> Iterator[bytes]:
            yield json.dumps(big).encode()

        streamed = client.post("/v1/threads", content=chunks(), headers=JSON)
        assert streamed.status_code == 413
        assert client.get("/v1/threads").json()["items"] == []


def test_a_message_id_of_another_resource_is_refused_and_left_alone(client: TestClient) -> None:
    client.post("/v1/threads", json={"thread_id": "a"})
    client.post(
        "/v1/threads/a/messages",
        json={"messages": [{"id": "m", "role": "user", "content": "hers"}]},
    )
    client.headers.update(bearer(BOB))
    client.post("/v1/threads", json={"thread_id": "b"})
    mine = {"messages": [{"id": "m", "role": "user", "content": "his"}]}
    answer = client.post("/v1/threads/b/messages", json=mine)
    assert answer.status_code == 409
    client.headers.update(bearer(ADA))
    (kept,) = client.get("/v1/threads/a/messages").json()["items"]
    assert kept["content"] == "hers" and kept["resource_id"] == "ada"


@pytest.mark.parametrize("backend", ["libsql", "pg"])
def test_concurrent_clients_lose_nothing(
    backend: str, tmp_path: Path, new_pg_database: Callable[[], str]
) -> None:
    """40 clients at once, each saving five batches and recalling after each: every message
    is stored and indexed, and each client's recalls see its own thread only."""
    url = f"libsql:///{tmp_path / 'c.db'}" if backend == "libsql" else new_pg_database()
    memory = AsyncMemory(url, url, "hash/64", {"semantic_recall": {"scope": "thread"}})
    app = create_app(memory, keys=Keys(KEYS))

    async def one_client(http: httpx.AsyncClient, n: int) -> list[str]:
        thread = f"t{n}"
        assert (await http.post("/v1/threads", json={"thread_id": thread})).status_code == 201
        seen = []
        for batch in range(5):
            texts = [f"client {n} batch {batch} note {k}" for k in range(4)]
            body = {"messages": [{"role": "user", "content": text} for text in texts]}
            saved = (await http.post(f"/v1/threads/{thread}/messages", json=body)).json()
            assert len(saved["indexed"]) == 4, saved
            recall = {"thread_id": thread, "query": texts[0], "per_page": 0}
            hits = (await http.post("/v1/recall", json=recall)).json()["hits"]
            seen += [hit["thread_id"] for hit in hits]
        return seen

    async def main() -> list[list[str]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers=bearer(ADA)
        ) as http:
            try:
                return await asyncio.gather(*(one_client(http, n) for n in range(40)))
            finally:
                await memory.aclose()

    seen = asyncio.run(main())
    assert all(set(threads) == {f"t{n}"} for n, threads in enumerate(seen))
    with TestClient(create_app(AsyncMemory(url, url), keys=Keys(KEYS), owns_memory=True)) as c:
        c.headers.update(bearer(ADA))
        totals = [c.get(f"/v1/threads/t{n}/messages").json()["total"] for n in range(40)]
    assert totals == [20] * 40


# ---- the OpenAPI document -------------------------------------------------------------

SCHEMA_MEMORY = AsyncMemory("memory://", "memory://", "hash/64", {"semantic_recall": True})
SCHEMA_APP = create_app(SCHEMA_MEMORY, keys=Keys(KEYS))
schema = schemathesis.openapi.from_asgi("/openapi.json", SCHEMA_APP)


SCALAR = (str, int, float, bool)


@schema.hook("filter_query")
def a_query_http_can_carry(context: Any, query: dict[str, Any] | None) -> bool:
    """A query whose every value reaches the server: `None`, `{}`, `[]` and nested values
    are sent as no parameter at all, so an unknown parameter given one never arrives and
    schemathesis would count the valid request it became as "invalid data accepted"."""

    def carried(value: Any) -> bool:
        listed = isinstance(value, list) and value and all(isinstance(v, SCALAR) for v in value)
        return isinstance(value, SCALAR) or bool(listed)

    return not query or all(carried(value) for value in query.values())


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_500_or_an_answer_that_breaks_the_schema(case: Any) -> None:
    """schemathesis over /openapi.json, every check but one: `positive_data_acceptance`
    expects every body the schema admits to be accepted, and the schema cannot say all the
    library checks (no NUL in a text, a part's `type` naming its kind); those are 422s."""
    case.call_and_validate(headers=bearer(ADA), excluded_checks=[positive_data_acceptance])


def test_the_openapi_document_is_3_1_and_describes_the_python_models() -> None:
    with TestClient(SCHEMA_APP) as client:
        document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert {"Thread", "Message", "RecallResult", "SearchHit", "SaveResult", "ErrorBody"} <= set(
        document["components"]["schemas"]
    )
    assert "HTTPBearer" in document["components"]["securitySchemes"]


# ---- keys and the command -------------------------------------------------------------


def test_keys_are_checked_and_never_quoted(tmp_path: Path) -> None:
    for bad in ({"short": "ada"}, {ADA: ""}, {ADA: 5}, [], {}):
        with pytest.raises(InvalidInputError) as caught:
            Keys(bad)  # type: ignore[arg-type]
        assert ADA not in str(caught.value)
    broken = tmp_path / "keys.json"
    broken.write_text(f'{{"{ADA}": "ada",}}')
    with pytest.raises(InvalidInputError, match="not JSON") as caught:
        Keys.from_file(broken)
    assert ADA not in str(caught.value)
    keys = Keys(KEYS)
    assert keys.resource_of(ADA) == "ada" and keys.resource_of(BOB) == "bob"
    assert keys.resource_of(ADA[:-1]) is None and keys.resource_of("") is None


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ([], "needs API keys"),
        (["--no-auth"], "--no-auth takes one --resource"),
        (["--no-auth", "--resource", "ada", "--host", "0.0.0.0"], "this machine only"),
        (["--resource", "ada"], "goes with --no-auth"),
    ],
)
def test_serve_refuses_what_would_open_it_to_anyone(
    arguments: list[str], says: str, tmp_path: Path
) -> None:
    """One line, exit code 2, nothing written."""
    env = {k: v for k, v in os.environ.items() if k != "RECALLSTACK_API_KEYS"}
    command = [sys.executable, "-m", "recallstack", "serve", "--db", str(tmp_path / "m.db")]
    done = subprocess.run(
        [*command, "--embedder", "hash/64", *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "m.db").exists()
