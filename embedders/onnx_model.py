"""A local sentence-transformers model exported to ONNX and run without torch.

The model is exported to ONNX once, on first use, with the mean pooling and
the L2 normalisation inside the graph, and cached as a file (offline: the
export reads the same local weights torch would). Every later process loads
the file without importing torch, into ONNX Runtime (float32: vectors equal
to torch's within float rounding) or OpenVINO (bfloat16 where the CPU does
it natively: 1.6x ONNX Runtime's throughput, vectors within cosine 0.9999 of
torch's). A query embeds in a few milliseconds instead of ~15
(`bench/local_model.py`); tests hold every runtime to cosine ≥ 0.999.

Only the shape the bundled model has is exported: a transformer, mean
pooling, normalisation. `supports(path)` says whether a model has it; the
embedder runs any other model through sentence-transformers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from recallstack.core.errors import BackendError, MissingDependencyError
from recallstack.core.vectors import Matrix

FORMAT = 2
"""Bumped when the exported graph changes, so that older cached files are not reused."""
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
BATCH_TOKENS = 512
"""Padded tokens a batch may hold (bench/local_model.py; LoCoMo sessions ran 1.7x faster
than with 32 texts a batch)."""
FUSED_COSINE = 0.99999
"""The least cosine between the plain and the fused graph's vectors for a probe batch
for the fused graph to be kept (measured: 0.999999 on LoCoMo's turns)."""
Engine = Literal["onnx", "openvino"]
"""What runs the exported graph: ONNX Runtime, or OpenVINO."""
Run = Callable[[Any, Any], Any]
"""A loaded graph: (input ids, attention mask) → vectors."""
PIPELINE = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]


def cache_dir() -> Path:
    """`$RECALLSTACK_CACHE_DIR`, else `$XDG_CACHE_HOME/recallstack`, else `~/.cache/recallstack`."""
    explicit = os.environ.get("RECALLSTACK_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "recallstack"


def supports(path: Path) -> bool:
    """Whether the model at `path` is a transformer, mean pooling and normalisation,
    with a `tokenizer.json` and weights on disk: what the export reproduces exactly."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        pooling = json.loads((path / modules[1]["path"] / "config.json").read_text())
    except (OSError, ValueError, LookupError, TypeError):
        return False
    return (
        [m.get("type") for m in modules] == PIPELINE
        and modules[0].get("path", "") == ""
        and pooling.get("pooling_mode_mean_tokens") is True
        and not any(
            v
            for k, v in pooling.items()
            if k.startswith("pooling_mode_") and "mean_tokens" not in k
        )
        and (path / "tokenizer.json").exists()
        and _weights(path) is not None
    )


def _weights(path: Path) -> Path | None:
    return next((path / w for w in WEIGHTS if (path / w).exists()), None)


def _source(path: Path) -> dict[str, Any]:
    """What an export is made from: the format, the weights file's location, size and
    modification time."""
    weights = _weights(path)
    assert weights is not None
    stat = weights.stat()
    return {
        "format": FORMAT,
        "weights": str(weights.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
    }


def cached_file(path: Path) -> Path:
    """Where the export of the model at `path` is kept: named for its `_source`, so new
    weights get a new export."""
    source = _source(path)
    key = f"{FORMAT}:{source['weights']}:{source['size']}:{source['mtime_ns']}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / "onnx" / f"{path.name}-{digest}.onnx"


def _remember(file: Path, source: dict[str, Any]) -> None:
    """Note beside an export what it was made from, so that a later export can tell it
    stale. Only housekeeping: a cache that cannot be written to goes without."""
    note = file.with_suffix(".json")
    if not note.exists():
        with contextlib.suppress(OSError):
            note.write_text(json.dumps(source))


def _forget_stale(folder: Path) -> None:
    """Remove the exports whose weights are gone or changed (a package uninstalled or
    upgraded, a virtual environment deleted) or whose format differs, and the pieces
    of exports cut short an hour ago or more: each is 90 MB that nothing will load.
    Exports without a note (made before notes were kept) are left alone."""
    for note in folder.glob("*.json"):
        try:
            source = json.loads(note.read_text())
            stat = Path(source["weights"]).stat()
            made = (source["format"], source["size"], source["mtime_ns"])
            stale = made != (FORMAT, stat.st_size, stat.st_mtime_ns)
        except FileNotFoundError:
            stale = True
        except (OSError, ValueError, LookupError, TypeError):
            continue  # a note being written, or not ours: leave it
        if stale:
            with contextlib.suppress(OSError):
                note.with_suffix(".onnx").unlink(missing_ok=True)
                note.unlink(missing_ok=True)
    hour_ago = time.time() - 3600
    for piece in [*folder.glob("*.part"), *folder.glob("*.fused")]:
        with contextlib.suppress(OSError):
            if piece.stat().st_mtime < hour_ago:
                piece.unlink()


@functools.cache
def native_bf16() -> bool:
    """Whether OpenVINO is installed and this CPU computes in bfloat16 natively
    (AVX512-BF16 or AMX): where OpenVINO embeds faster than ONNX Runtime. Asked once
    per process."""
    try:
        openvino = _openvino()
    except ImportError:
        return False
    capabilities = openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    return "BF16" in capabilities


def _openvino() -> Any:
    """OpenVINO, imported without its usage telemetry: on import it sends an event to
    Google Analytics unless the user opted out (and writes an id under ~/intel);
    recallstack works offline. Its model-conversion tools then use their stub."""
    blocked = "openvino" not in sys.modules and "openvino_telemetry" not in sys.modules
    if blocked:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]
    try:
        import openvino
    finally:
        if blocked:
            del sys.modules["openvino_telemetry"]
    return openvino


def _onnxruntime(file: Path, threads: int | None) -> Run:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # warnings about the export's shapes are noise here
    if threads is not None:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])

    def run(ids: Any, mask: Any) -> Any:
        return session.run(None, {"input_ids": ids, "attention_mask": mask})[0]

    return run


def _openvino_model(file: Path, threads: int | None) -> Run:
    """The graph compiled by OpenVINO for the CPU, in bfloat16 where the CPU does it
    natively and float32 elsewhere; an inference request per thread."""
    config = {
        "INFERENCE_PRECISION_HINT": "bf16" if native_bf16() else "f32",
        "PERFORMANCE_HINT": "LATENCY",
    }
    if threads is not None:
        config["INFERENCE_NUM_THREADS"] = str(threads)
    compiled = _openvino().Core().compile_model(str(file), "CPU", config)
    requests = threading.local()

    def run(ids: Any, mask: Any) -> Any:
        if not hasattr(requests, "request"):
            requests.request = compiled.create_infer_request()
        outputs = requests.request.infer({"input_ids": ids, "attention_mask": mask})
        return outputs[0].copy()  # the request reuses its output buffer

    return run


class OnnxModel:
    """An exported model loaded into ONNX Runtime or OpenVINO (thread-safe for `embed`)."""

    def __init__(
        self, path: Path, dimension: int, threads: int | None, engine: Engine = "onnx"
    ) -> None:
        self.dimension = dimension
        package = "onnxruntime" if engine == "onnx" else "openvino"
        try:
            if engine == "openvino":
                _openvino()
            else:
                import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise MissingDependencyError("local", package, "local") from exc
        file = cached_file(path)
        loader = _onnxruntime if engine == "onnx" else _openvino_model

        def export() -> None:
            _export(path, file)
            _forget_stale(file.parent)

        if not file.exists():
            export()
        try:
            self._run = loader(file, threads)
        except Exception:  # a truncated or corrupt cache file: export it again, once
            export()
            try:
                self._run = loader(file, threads)
            except Exception as exc:
                raise BackendError(f"local: {package} cannot load {file}: {exc}") from exc
        _remember(file, _source(path))

    def embed(self, token_ids: Sequence[Sequence[int]], batch_size: int) -> Matrix:
        """Normalised mean-pooled vectors of tokenized texts (special tokens included),
        longest first, in padded batches of at most `batch_size` texts and
        `BATCH_TOKENS` padded tokens: on a CPU, padding a short text to a long
        one's length costs more than a smaller batch does."""
        order = sorted(range(len(token_ids)), key=lambda i: -len(token_ids[i]))
        vectors: Matrix = np.empty((len(token_ids), self.dimension), dtype=np.float32)
        start = 0
        while start < len(order):
            width = len(token_ids[order[start]])
            count = max(1, min(batch_size, BATCH_TOKENS // max(width, 1)))
            batch = order[start : start + count]
            start += count
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(token_ids[i])] = token_ids[i]
                mask[row, : len(token_ids[i])] = 1
            vectors[batch] = self._run(ids, mask)
        return vectors


def _export(path: Path, file: Path) -> None:
    """Export the model with torch (its weights, offline) into `file`, atomically, with
    its attention and layer norms fused where that leaves the vectors unchanged."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingDependencyError("local", "torch", "local") from exc

    class Pooled(torch.nn.Module):
        """The transformer, mean pooling over the mask, and L2 normalisation."""

        def __init__(self, transformer: Any) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.transformer(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=1)

    # eager attention: the graph ONNX Runtime's fusion recognises (torch's SDPA is not)
    loaded = SentenceTransformer(
        str(path), device="cpu", model_kwargs={"attn_implementation": "eager"}
    )
    transformer: Any = loaded[0].auto_model
    model = Pooled(transformer.eval())
    example = torch.ones((2, 8), dtype=torch.int64)
    file.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=file.parent, suffix=".part")
    os.close(handle)
    os.chmod(temporary, 0o644)  # a cache other users of the machine may read
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it fixes
            torch.onnx.export(
                model,
                (example, example),
                temporary,
                input_names=["input_ids", "attention_mask"],
                output_names=["embedding"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        _fuse(Path(temporary), transformer.config)
        os.replace(temporary, file)  # readers see the whole file or none
    except Exception as exc:
        Path(temporary).unlink(missing_ok=True)
        raise BackendError(
            f"local: cannot export {path.name} to ONNX in {file.parent}: {exc}"
        ) from exc


def _fuse(file: Path, config: Any) -> None:
    """Replace the exported BERT graph in `file` by ONNX Runtime's fused one (attention,
    embedding and skip layer norms, bias GELU), if the two give the same vectors for a
    probe batch; any other architecture, or a fusion that fails, keeps the plain graph
    (fusion is only speed). A one-sentence query embeds in 2.6 ms instead of 3.8;
    batches gain about 3% (`bench/local_model.py`)."""
    if getattr(config, "model_type", None) != "bert":
        return
    import logging

    notes = logging.getLogger("onnxruntime.transformers")  # the optimizer's, while it runs
    level = notes.level
    notes.setLevel(logging.ERROR)
    candidate = file.with_suffix(".fused")
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        fused = optimize_model(
            str(file),
            model_type="bert",
            num_heads=config.num_attention_heads,
            hidden_size=config.hidden_size,
        )
        fused.save_model_to_file(str(candidate))
        if _least_cosine(file, candidate, config.vocab_size) >= FUSED_COSINE:
            os.replace(candidate, file)
    except Exception:  # an optimizer that cannot read this graph: the plain one stands
        return
    finally:
        notes.setLevel(level)
        candidate.unlink(missing_ok=True)


def _least_cosine(plain: Path, fused: Path, vocabulary: int) -> float:
    """The least cosine between two graphs' vectors for padded inputs of mixed lengths."""
    import onnxruntime

    lengths = (64, 23, 9, 2)
    ids = np.random.default_rng(0).integers(1000, vocabulary, (len(lengths), max(lengths)))
    mask = (np.arange(max(lengths)) < np.array(lengths)[:, None]).astype(np.int64)
    inputs = {"input_ids": ids * mask, "attention_mask": mask}

    def vectors(file: Path) -> Matrix:
        session = onnxruntime.InferenceSession(str(file), providers=["CPUExecutionProvider"])
        result: Matrix = session.run(None, inputs)[0]
        return result

    return float((vectors(plain) * vectors(fused)).sum(axis=1).min())
