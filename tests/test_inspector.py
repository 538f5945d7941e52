"""The inspector's server side: the page at /inspect (no data in it, a policy that keeps its
requests on this server), the index states it shows, and `recallstack inspect`, which
serves it on 127.0.0.1 with a key of its own. The page in a browser: tests/browser/."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from served import ADA, BOB, KEYS, bearer

from recallstack import AsyncMemory, Memory, Message
from recallstack.server.app import create_app
from recallstack.server.keys import Keys


@pytest.fixture
def client() -> Iterator[TestClient]:
    memory = AsyncMemory("memory://", "memory://", "hash/64", {"semantic_recall": True})
    with TestClient(create_app(memory, keys=Keys(KEYS), owns_memory=True)) as client:
        client.headers.update(bearer(ADA))
        client.post("/v1/threads", json={"thread_id": "trip", "title": "Kyoto"})
        messages = [
            {"id": "a", "role": "system", "content": "be brief"},
            {"id": "b", "role": "user", "content": "vegetarian food near the temples"},
            {"id": "c", "role": "assistant", "content": "try shojin ryori"},
        ]
        client.post("/v1/threads/trip/messages", json={"messages": messages})
        yield client


def test_the_page_holds_no_data_and_may_reach_this_server_only(client: TestClient) -> None:
    page = client.get("/inspect", headers={"Authorization": ""})  # no key: the page is static
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "connect-src 'self'" in policy and "default-src 'none'" in policy
    assert "trip" not in page.text and "shojin" not in page.text
    assert not re.search(r"""(src|href)=["']https?:""", page.text)  # nothing loaded from afar
    assert "/inspect" not in client.get("/openapi.json").json()["paths"]


def test_index_states_of_a_page_and_only_for_its_owner(client: TestClient) -> None:
    found = client.get("/v1/threads/trip/index-states").json()
    index, context = found["indexes"]  # the default's: own vectors, contextual ones
    assert context == f"{index}_context1"
    assert found["messages"] == {
        "a": {index: "not embedded", context: "not embedded"},
        "b": {index: "indexed", context: "indexed"},
        "c": {index: "indexed", context: "indexed"},
    }
    paged = client.get("/v1/threads/trip/index-states", params={"per_page": 1}).json()
    assert list(paged["messages"]) == ["c"]  # the newest page, as /messages pages them
    other = client.get("/v1/threads/trip/index-states", headers=bearer(BOB))
    assert other.status_code == 404 and other.json()["error"] == "not_found"
    assert client.get("/v1/threads/nope/index-states").status_code == 404
    assert (
        client.get("/v1/threads/trip/index-states", headers={"Authorization": ""}).status_code
        == 401
    )


def test_recall_hits_carry_each_signals_rank(client: TestClient) -> None:
    body = {
        "thread_id": "trip",
        "query": "temples food",
        "per_page": 0,
        "options": {"semantic_recall": {"top_k": 2, "hybrid": True, "message_range": 0}},
    }
    hits = client.post("/v1/recall", json=body).json()["hits"]
    assert hits and all(h["dense_rank"] >= 1 for h in hits if h["dense_score"] is not None)
    ranked = sorted((h for h in hits if h["dense_rank"]), key=lambda h: h["dense_rank"])
    scores = [h["dense_score"] for h in ranked]
    assert scores == sorted(scores, reverse=True)  # rank 1 is the best semantic score
    client.post("/v1/threads", json={"thread_id": "today"})
    body = {**body, "thread_id": "today", "per_page": 10}
    client.post(
        "/v1/threads/today/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    result = client.post("/v1/recall", json=body).json()
    (history,) = [m["id"] for m in result["messages"] if m["thread_id"] == "today"]
    assert history not in result["recalled_ids"]
    assert set(result["recalled_ids"]) == {m["id"] for m in result["messages"]} - {history}
    hits = {h["message_id"] for h in result["hits"]} - {history}  # the history page's stay
    assert hits and hits <= set(result["recalled_ids"])
    empty = client.get("/v1/threads/today/index-states", params={"page": 5}).json()
    assert empty["messages"] == {}


def seed(db: Path, resources: list[str]) -> None:
    url = f"libsql:///{db}"
    with Memory(url, url, "hash/64", {"semantic_recall": True}) as memory:
        for resource in resources:
            memory.create_thread(resource, thread_id=f"{resource}-thread", title=resource)
            memory.save_messages(
                [
                    Message(
                        thread_id=f"{resource}-thread", role="user", content=f"{resource} says hi"
                    )
                ]
            )


def inspect(*arguments: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "recallstack", "inspect", *arguments, "--embedder", "hash/64"]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True)


def test_inspect_serves_one_resource_on_loopback_with_a_key_of_its_own(tmp_path: Path) -> None:
    seed(tmp_path / "m.db", ["maya"])
    running = inspect(str(tmp_path / "m.db"))
    try:
        assert running.stderr is not None
        line = running.stderr.readline()
        address = re.search(r"http://127\.0\.0\.1:\d+/inspect#key=(\S+)", line)
        assert address, line
        base, key = address.group(0).split("/inspect")[0], address.group(1)
        assert httpx.get(f"{base}/inspect").status_code == 200
        threads = httpx.get(f"{base}/v1/threads", headers=bearer(key)).json()["items"]
        assert [t["id"] for t in threads] == ["maya-thread"]
        assert httpx.get(f"{base}/v1/threads").status_code == 401
        assert httpx.get(f"{base}/v1/threads", headers=bearer(ADA)).status_code == 401
    finally:
        running.terminate()
        running.wait(timeout=30)
    again = inspect(str(tmp_path / "m.db"))  # a new run: a new key
    try:
        assert again.stderr is not None
        assert key not in again.stderr.readline()
    finally:
        again.terminate()
        again.wait(timeout=30)


@pytest.mark.parametrize(
    ("resources", "arguments", "says"),
    [
        (["maya", "sam"], [], "several resources ('maya', 'sam'): choose one with --resource"),
        ([], [], "holds no threads yet"),
        (None, [], "no database at"),
        (["maya"], ["--resource", ""], "resource"),
    ],
)
def test_inspect_refuses_in_one_line_and_writes_nothing(
    tmp_path: Path, resources: list[str] | None, arguments: list[str], says: str
) -> None:
    db = tmp_path / "m.db"
    if resources is not None:
        seed(db, resources)
    before = db.read_bytes() if db.exists() else None
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "recallstack",
            "inspect",
            str(db),
            "--embedder",
            "hash/64",
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert (db.read_bytes() if db.exists() else None) == before
