"""The local model's throughput, and the demo's total time cold and warm.

    python bench/local_model.py

Throughput: sentences/s embedding 1,024 distinct sentences in batches of 32
(after one warm-up batch). Demo: `recallstack demo` as a new process, cold
(no database yet) and warm (the database from the cold run), wall time.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recallstack.embedders.local import LocalEmbedder


def throughput() -> None:
    start = time.perf_counter()
    model = LocalEmbedder(batch_size=32)
    print(f"model load                 {time.perf_counter() - start:8.2f} s")
    sentences = [
        f"Message {i}: we talked about trip number {i % 17} and the recipe for dish {i % 23}."
        for i in range(1024)
    ]
    model.embed(sentences[:32])
    start = time.perf_counter()
    model.embed(sentences)
    elapsed = time.perf_counter() - start
    print(f"throughput (batch 32)      {len(sentences) / elapsed:8.0f} sentences/s")


def demo() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "local.db"
        command = [sys.executable, "-m", "recallstack", "demo", "--db", str(db)]
        for label in ("cold (new database)", "warm (database exists)"):
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            print(f"demo, {label:22s} {time.perf_counter() - start:6.2f} s")


if __name__ == "__main__":
    throughput()
    demo()
