"""A real HTTP server on loopback that speaks the OpenAI embeddings API.

It serves vectors from a real embedder, and can be told to answer the next
requests with given status codes (429, 500, ...) or to stall, to exercise
retries and timeouts. Like a real server it refuses (HTTP 400) an input over
`max_input_tokens`, a request over `max_request_tokens` (both counted by its
embedder's tokenizer), and any input containing `REFUSED_MARK` (a content
filter).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from recallstack.core.contracts.embedder import Embedder

REFUSED_MARK = "<<refused by the server>>"


class EmbeddingServer:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: list[int | float | tuple[int, str]] = []
        """Next answers: an int is an HTTP status to fail with (Retry-After: 0), a
        (status, Retry-After) pair the same with that header, a float seconds to stall."""
        self.url = ""
        self.max_input_tokens: int | None = embedder.max_input
        self.max_request_tokens: int | None = None

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length", 0))
        body = json.loads(handler.rfile.read(length))
        self.requests.append(body)
        self.headers.append(dict(handler.headers))
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, float):
                time.sleep(step)
            else:
                status, retry_after = step if isinstance(step, tuple) else (step, "0")
                self._send(
                    handler,
                    status,
                    {"error": {"message": f"scripted {status}"}},
                    {"Retry-After": retry_after},
                )
                return
        if handler.path != "/v1/embeddings":
            self._send(handler, 404, {"error": {"message": "no such route"}})
            return
        if body.get("model") == "unknown-model-404":
            self._send(handler, 404, {"error": {"message": "The model does not exist"}})
            return
        refusal = self._refusal(body["input"])
        if refusal:
            self._send(handler, 400, {"error": {"message": refusal}})
            return
        vectors = self.embedder.embed(body["input"])
        if "dimensions" in body:
            vectors = vectors[:, : body["dimensions"]]
        data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()}
            for i, v in reversed(list(enumerate(vectors)))  # out of order, as servers may
        ]
        self._send(handler, 200, {"object": "list", "data": data, "model": body["model"]})

    def _refusal(self, texts: list[str]) -> str | None:
        sizes = [len(self.embedder.token_offsets(t)) for t in texts]
        for i, (text, size) in enumerate(zip(texts, sizes, strict=True)):
            if REFUSED_MARK in text:
                return f"input {i} was flagged by the content filter"
            if self.max_input_tokens is not None and size > self.max_input_tokens:
                return f"input {i} has {size} tokens, over {self.max_input_tokens}"
        if self.max_request_tokens is not None and sum(sizes) > self.max_request_tokens:
            return f"the request has {sum(sizes)} tokens, over {self.max_request_tokens}"
        return None

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        payload = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        with contextlib.suppress(BrokenPipeError):  # the client timed out and left
            handler.wfile.write(payload)


@contextmanager
def serve(embedder: Embedder) -> Iterator[EmbeddingServer]:
    server = EmbeddingServer(embedder)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            server.handle(self)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
