"""The curl session of docs/server.md, run as written against a started server: a reader
who pastes it gets what the page promises."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from served import ADA, serving

PAGE = Path(__file__).parent.parent / "docs" / "server.md"


def documented_session() -> str:
    section = PAGE.read_text().split("## A session with curl", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "docs/server.md lost its curl session"
    return block.group(1)


def test_the_documented_curl_session_works(tmp_path: Path) -> None:
    script = documented_session()
    assert script.startswith("URL=http://localhost:8000\nKEY=")
    with serving(tmp_path) as url:
        body = script.split("\n", 2)[2]
        done = subprocess.run(
            ["bash", "-c", f"URL={url}\nKEY={ADA}\n{body}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    thread, saved, recalled, found, page, threads = map(json.loads, done.stdout.splitlines())
    assert thread["id"] == "trip" and thread["resource_id"] == "ada"
    assert len(saved["indexed"]) == 3
    assert recalled["messages"][0]["content"] == "I am vegetarian" and recalled["hits"]
    assert [hit["message"]["content"] for hit in found] == ["We fly to Osaka in May"]
    assert page["total"] == 3 and len(page["items"]) == 2
    assert [t["id"] for t in threads["items"]] == ["trip"]
