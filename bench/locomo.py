"""Retrieval quality on LoCoMo on several backends in one run: `recallstack eval locomo`
(`recallstack/locomo.py`, where the protocol is) for each URL, as a markdown table.

    python bench/locomo.py ../shared/data/locomo/locomo-dev.json [--backend URL ...]
        [--embedder SPEC] [--conversations N] [--options JSON]

`--backend` names a URL used as storage and vector store (repeatable; default:
a LibSQL file in a temporary folder). The data stays where it is (its licence
is non-commercial); nothing of it is copied into the repository. The other
LoCoMo benches import the protocol's pieces from here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from recallstack import Memory
from recallstack.locomo import (
    CATEGORIES,
    DRAGON,
    KS,
    Evaluation,
    evaluate,
    evidence,
    messages_of,
    sessions,
    turn_text,
)
from recallstack.locomo import load as load_file

PAPER = {"DRAGON (paper, all ten conversations)": DRAGON}
__all__ = ["CATEGORIES", "KS", "PAPER", "evidence", "ingest", "role", "sessions", "turn_text"]


def role(turn: dict[str, Any], conversation: dict[str, Any]) -> str:
    """The first speaker is the user, the other the assistant."""
    return "user" if turn["speaker"] == conversation["speaker_a"] else "assistant"


def ingest(memory: Memory, sample: dict[str, Any]) -> int:
    """Write one conversation as `evaluate` does; returns its turn count."""
    count = 0
    for thread, messages in messages_of(sample):
        memory.create_thread(sample["sample_id"], thread_id=thread)
        memory.save_messages(messages)
        count += len(messages)
    return count


def report(name: str, result: Evaluation) -> None:
    summary = result.summary()
    search = summary["search_ms"]
    print(
        f"\n{name}: {result.turns} turns, ingest {summary['ingest_turns_per_second']:.0f} "
        f"turns/s, search p50 {search['p50']:.1f} ms, p95 {search['p95']:.1f} ms "
        "(embedding included)"
    )
    print(f"| questions | n | {' | '.join(f'R@{k}' for k in KS)} |")
    print("|---|---|" + "---|" * len(KS))
    cells = " | ".join(f"{v:.1f}" for v in result.rows()["recall"])
    print(f"| all (1-4) | {len(result.questions)} | {cells} |")
    for category, label in CATEGORIES.items():
        n = sum(q.category == category for q in result.questions)
        if n:
            cells = " | ".join(f"{v:.1f}" for v in result.rows(category)["recall"])
            print(f"| {category} {label} | {n} | {cells} |")
    for anchor, figures in PAPER.items():
        print(f"| {anchor} | | {' | '.join(f'{v:.1f}' for v in figures)} |")


def arguments(doc: str) -> argparse.ArgumentParser:
    """A parser with what every LoCoMo bench takes: the file and `--conversations`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("path", type=Path, help="a LoCoMo JSON file")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    return parser


def load(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The conversations `arguments` named."""
    return load_file(args.path)[: args.conversations]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--backend", action="append", help="storage and vector URL (repeatable)")
    parser.add_argument("--embedder", default="local/all-MiniLM-L6-v2")
    parser.add_argument("--options", default='{"semantic_recall": true}', help="memory options")
    args = parser.parse_args()
    data = load(args)
    options = json.loads(args.options)
    with tempfile.TemporaryDirectory() as tmp:
        for url in args.backend or [f"libsql:///{Path(tmp) / 'locomo.db'}"]:
            with Memory(url, url, args.embedder, options) as memory:
                report(f"{url}, {args.options}", evaluate(memory, data))


if __name__ == "__main__":
    main()
