"""`openai/<model>`: embeddings from any OpenAI-compatible HTTP API.

Works with OpenAI itself and with compatible servers (Ollama, vLLM, LM Studio,
TEI, ...) through `base_url`. Inputs are batched, 429 and 5xx answers and
transport errors are retried with exponential backoff (honouring
Retry-After), every request has a timeout, and other errors say what the
server said.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from recallstack.core.embedder import Embedder
from recallstack.core.errors import BackendError, InvalidInputError
from recallstack.core.scores import Matrix

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder(Embedder):
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
        batch_size: int = 256,
        max_input: int = 8000,
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
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self.model_id = model
        self.max_retries = max_retries
        self.backoff = backoff
        self.batch_size = batch_size
        self.max_input = max_input
        self._dimensions = dimensions
        self.dimension = dimensions or KNOWN_DIMENSIONS.get(model) or self._probe()

    def _probe(self) -> int:
        """Ask the server once, for models whose size we do not know."""
        return int(self._request(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> Matrix:
        parts = [
            self._request(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        if not parts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.concatenate(parts)

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

        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = self._client.post("/embeddings", json=payload)
            except httpx.TransportError as exc:
                if last:
                    raise BackendError(f"{self.base_url}: {exc!r}") from exc
                time.sleep(self.backoff * 2**attempt)
                continue
            if response.status_code == 429 or response.status_code >= 500:
                if last:
                    raise BackendError(
                        f"{self.base_url}: HTTP {response.status_code} after "
                        f"{self.max_retries + 1} attempts: {_message(response)}"
                    )
                time.sleep(_retry_after(response) or self.backoff * 2**attempt)
                continue
            if response.status_code >= 400:
                raise BackendError(
                    f"{self.base_url}: HTTP {response.status_code}: {_message(response)}"
                )
            return response.json()
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._client.close()


def _message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except Exception:
        return str(response.text[:200])


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return min(float(value), 60.0) if value is not None else None
    except ValueError:
        return None


def from_spec(spec: str, **options: Any) -> OpenAIEmbedder:
    """`openai/text-embedding-3-small` (options: base_url, api_key, dimensions, ...)."""
    _, _, model = spec.partition("/")
    if not model:
        raise InvalidInputError(f"{spec!r}: write openai/<model>")
    return OpenAIEmbedder(model, **options)
