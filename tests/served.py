"""`recallstack serve` started as users start it: a subprocess on a free port with a keys
file, for the tests of the HTTP API, the MCP endpoint and the documented curl session."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ADA, BOB = "ada-key-0123456789abcdef", "bob-key-0123456789abcdef"
KEYS = {ADA: "ada", BOB: "bob"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serving(
    tmp_path: Path,
    db: Path | None = None,
    embedder: str = "hash/64",
    keys: dict[str, str] = KEYS,
) -> Iterator[str]:
    """The server's URL while it runs (on the LibSQL file `db`, a new one by default);
    on the way out, checks no key reached its log."""
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(keys))
    port = free_port()
    command = [sys.executable, "-m", "recallstack", "serve", "--db", str(db or tmp_path / "m.db")]
    command += ["--embedder", embedder, "--keys", str(keys_file), "--port", str(port)]
    log_path = tmp_path / "server.log"
    log = log_path.open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/v1/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert not any(key in log_path.read_text() for key in keys)
