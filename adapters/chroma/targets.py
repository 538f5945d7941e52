"""Throwaway instances of the chroma backend for the conformance suite and the tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="recallstack-chroma-") as tmp:
        yield f"chroma:///{tmp}"


@contextmanager
def server(host: str = "127.0.0.1") -> Iterator[str]:
    """A real `chroma run` server on a free loopback port, stopped afterwards."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    address = f"[{host}]" if ":" in host else host
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with tempfile.TemporaryDirectory(prefix="recallstack-chroma-server-") as tmp:
        process = subprocess.Popen(
            [chroma, "run", "--path", tmp, "--host", host, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://{address}:{port}/api/v2/heartbeat", timeout=1)
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("chroma run did not start") from None
                    time.sleep(0.2)
            yield f"chroma+http://{address}:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)
