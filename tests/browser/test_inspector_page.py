"""The inspector in a real browser: Debian's Chromium driven by Playwright, against
`recallstack serve` on the demo's data and model. What the page shows is compared
with what the API answers for the same key. Run by `nox -s inspector` (CI too); the
screenshot goes to reports/inspector.png."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from served import bearer, serving

CHROMIUM = os.environ.get("RECALLSTACK_CHROMIUM", "/usr/bin/chromium")
"""The system's browser: Playwright downloads none."""
FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # this machine's network is closed: ask it nothing
    "--disable-component-update",
    "--disable-sync",
]
MAYA, SAM = "maya-key-0123456789abcdef", "sam-key-0123456789abcdef"
REPORTS = Path(__file__).parents[2] / "reports"
QUERY = "Where can I get a meat-free meal near the temples?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo's conversations (`recallstack demo`, its local model), served with a key
    for their user and one for a user with nothing."""
    tmp = tmp_path_factory.mktemp("inspector")
    db = tmp / "demo.db"
    demo = [sys.executable, "-m", "recallstack", "demo", "--db", str(db)]
    subprocess.run(demo, check=True, capture_output=True, timeout=600)
    keys = {MAYA: "maya", SAM: "sam"}
    with serving(tmp, db=db, embedder="local/all-MiniLM-L6-v2", keys=keys) as url:
        said = {"messages": [{"role": "user", "content": "Hi again! Sorting out meals now."}]}
        api(url, "POST", "/v1/threads/today/messages", json=said)
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """A fresh context (no stored key), failing the test on any request that leaves
    the server or any error the page logs."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    opened = context.new_page()
    elsewhere: list[str] = []
    errors: list[str] = []
    opened.on("request", lambda r: None if r.url.startswith(server) else elsewhere.append(r.url))
    opened.on("pageerror", lambda e: errors.append(str(e)))
    yield opened
    context.close()
    assert not elsewhere, elsewhere
    assert not errors, errors


def api(server: str, method: str, path: str, key: str = MAYA, **kw: Any) -> Any:
    answer = httpx.request(method, f"{server}{path}", headers=bearer(key), timeout=60, **kw)
    answer.raise_for_status()
    return answer.json()


def shown(page: Page, selector: str) -> list[str]:
    return [e.get_attribute("data-id") or "" for e in page.query_selector_all(selector)]


def test_threads_and_messages_with_their_index_states(page: Page, server: str) -> None:
    page.goto(f"{server}/inspect#key={MAYA}")
    threads = api(server, "GET", "/v1/threads")["items"]
    expect(page.locator("#threads li[data-thread]")).to_have_count(len(threads))
    listed = page.locator("#threads li[data-thread]").evaluate_all(
        "items => items.map(i => i.dataset.thread)"
    )
    assert listed == [t["id"] for t in threads]
    assert "#key" not in page.url  # the key leaves the address bar

    page.click("#threads li[data-thread='japan-trip']")
    messages = api(server, "GET", "/v1/threads/japan-trip/messages?per_page=100")["items"]
    expect(page.locator("#messages .message")).to_have_count(len(messages))
    assert shown(page, "#messages .message") == [m["id"] for m in messages]
    states = api(server, "GET", "/v1/threads/japan-trip/index-states?per_page=100")
    for m in messages:
        badges = page.locator(f"#messages .message[data-id='{m['id']}'] .state").all_inner_texts()
        assert sorted(b.split(": ")[1] for b in badges) == sorted(
            states["messages"][m["id"]].values()
        )
    assert all(v == "indexed" for s in states["messages"].values() for v in s.values())


def test_a_recall_shows_what_the_api_returns_and_the_score_plot(page: Page, server: str) -> None:
    page.goto(f"{server}/inspect#key={MAYA}&thread=today")
    expect(page.locator("#thread-title")).to_have_text("Today")
    expect(page.locator("#thread-note")).to_contain_text("1 message · indexes: memory_messages_")
    expect(page.locator("#messages .message .state")).to_have_text(
        ["vectors: indexed", "context 1: indexed"]
    )
    page.fill("#query", QUERY)
    page.fill("#top-k", "3")
    expect(page.locator("#hybrid")).to_be_checked()  # the library's default
    page.fill("#threshold", "0.2")
    page.click("#run")
    expect(page.locator("#result")).to_be_visible()

    options = {
        "top_k": 3,
        "message_range": 1,
        "scope": "resource",
        "threshold": 0.2,
        "hybrid": {"context": 1},
        "filter": None,
    }
    body = {"thread_id": "today", "query": QUERY, "options": {"semantic_recall": options}}
    result = api(server, "POST", "/v1/recall", json=body)
    assert result["hits"], "the demo's question recalls something"
    assert shown(page, "#hits tbody tr") == [h["message_id"] for h in result["hits"]]
    scores = page.locator("#hits tbody tr td:nth-child(2)").all_inner_texts()
    assert scores == [f"{h['score']:.3f}" for h in result["hits"]]
    assert shown(page, "#context-messages li") == [m["id"] for m in result["context"]]
    recalled = [m["id"] for m in result["messages"] if m["id"] in result["recalled_ids"]]
    assert recalled and shown(page, "#recalled li") == recalled
    assert any(m["role"] == "system" for m in result["context"])  # other threads' note

    wide = {**options, "top_k": 100, "threshold": None, "message_range": 0}
    body["options"] = {"semantic_recall": wide}
    candidates = [h["dense_score"] for h in api(server, "POST", "/v1/recall", json=body)["hits"]]
    semantic = [s for s in candidates if s is not None]
    expect(page.locator("#plot circle.candidate")).to_have_count(len(semantic))
    expect(page.locator("#threshold-line")).to_have_count(1)
    passing = sum(s >= 0.2 for s in semantic)
    expect(page.locator("#plot-note")).to_contain_text(f"{passing} at or above the threshold")
    REPORTS.mkdir(exist_ok=True)
    page.screenshot(path=str(REPORTS / "inspector.png"))


def test_another_key_sees_nothing_of_it(page: Page, server: str) -> None:
    page.goto(f"{server}/inspect#key={SAM}&thread=japan-trip")
    expect(page.locator("#threads")).to_have_text("No threads.")
    expect(page.locator("#thread-note")).to_have_text("No thread japan-trip here.")
    expect(page.locator("#messages .message")).to_have_count(0)
    page.fill("#query", "Kyoto")
    page.click("#run")
    expect(page.locator("#error")).to_contain_text("open a thread first")
    assert "Kyoto" not in page.locator("main").inner_text()  # the demo user's trip


def test_a_wrong_key_is_refused_and_asked_for_again(page: Page, server: str) -> None:
    page.goto(f"{server}/inspect#key=not-a-key-of-this-server")
    expect(page.locator("#error")).to_contain_text("a valid API key is needed")
    expect(page.locator("#key-form")).to_be_visible()
    page.fill("#key", MAYA)
    page.click("#key-form button")
    expect(page.locator("#threads li[data-thread]")).to_have_count(5)
    expect(page.locator("#error")).to_have_text("")
